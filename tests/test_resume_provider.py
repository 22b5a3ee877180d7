"""``cacao --dir P --resume`` without ``--provider`` goes on with the run's own provider and model
(its context.json): a replay run resumes as a replay, with no API key set (it used to stop at
"needs ANTHROPIC_API_KEY ..."); ``--provider`` given still wins."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from cacao_tui.launch import _dry_run_asked, _provider_asked
from cacao_tui.problem import load_problem
from cacao_tui.run_request import RunRequest
from cacao_tui.runs.launcher import RunOptions
from cacao_tui.store.layout import RunLayout
from tests.pathenv import child_pythonpath

REPO = Path(__file__).resolve().parents[1]


def _keyless_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_API_BASE", "_BASE_URL"))}
    env.pop("LLM_PROVIDER", None)
    return {**env, "HOME": str(home), "PYTHONPATH": child_pythonpath()}


def test_a_replay_run_resumes_as_a_replay_without_a_key(tmp_path: Path) -> None:
    problem = tmp_path / "mmul"
    shutil.copytree(REPO / "problems" / "mmul", problem, ignore=shutil.ignore_patterns("output", "archive"))
    env = _keyless_env(tmp_path)
    base = [sys.executable, "-m", "cacao_tui", "--dir", str(problem), "--dry-run", "--no-ui", "--max-iter", "1"]
    first = subprocess.run([*base, "--provider", "replay"], capture_output=True, text=True, env=env, timeout=240)
    assert first.returncode == 0, first.stderr[-2000:]
    # The run finished: --resume has nothing to continue and says so, exit 1 (the original's status).
    done = subprocess.run([*base, "--resume"], capture_output=True, text=True, env=env, timeout=240)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "cannot resume: the run there has finished" in done.stderr and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1
    # As if it had been stopped while its branches ran: --resume goes on with it.
    master = RunLayout(problem).master
    master.write_text(master.read_text().replace('"phase": "finished"', '"phase": "dispatched"'))
    again = subprocess.run([*base, "--resume"], capture_output=True, text=True, env=env, timeout=240)
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.startswith("cacao: resuming mmul · replay/replay · dry run (no GPU)")
    # The choice itself: --provider wins; --model replaces the run's model; a fresh run asks the environment.
    loaded = load_problem(problem)
    assert _provider_asked(RunRequest(loaded, resume=True)) == ("replay", "replay")
    assert _provider_asked(RunRequest(loaded, resume=True, model="m")) == ("replay", "m")
    assert _provider_asked(RunRequest(loaded, resume=True, provider="openai")) == ("openai", None)
    assert _provider_asked(RunRequest(loaded)) == (None, None)


def test_a_dry_run_resumes_as_a_dry_run_without_a_gpu(tmp_path: Path) -> None:
    """Issue 32 item 12: --resume of a dry run, with no --dry-run, on a machine without a GPU (no
    nvidia-smi on PATH) goes on dry; --no-dry-run asks for the GPU and is refused there."""
    problem = tmp_path / "mmul"
    shutil.copytree(REPO / "problems" / "mmul", problem, ignore=shutil.ignore_patterns("output", "archive"))
    env = {**_keyless_env(tmp_path), "PATH": "/usr/bin:/bin"}
    assert shutil.which("nvidia-smi", path=env["PATH"]) is None
    base = [sys.executable, "-m", "cacao_tui", "--dir", str(problem), "--no-ui", "--max-iter", "1"]
    first = subprocess.run([*base, "--provider", "replay", "--dry-run", "--strategies", "1"], capture_output=True,
                           text=True, env=env, timeout=240)  # fmt: skip
    assert first.returncode == 0, first.stderr[-2000:]
    # As if it had been stopped while its branches ran (a finished run has nothing to resume).
    master = RunLayout(problem).master
    master.write_text(master.read_text().replace('"phase": "finished"', '"phase": "dispatched"'))
    again = subprocess.run([*base, "--resume"], capture_output=True, text=True, env=env, timeout=240)
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.startswith("cacao: resuming mmul · replay/replay · dry run (no GPU)"), again.stdout[:300]
    real = subprocess.run([*base, "--resume", "--no-dry-run"], capture_output=True, text=True, env=env, timeout=240)
    assert real.returncode == 2 and "no NVIDIA GPU found" in real.stderr, real.stderr
    loaded = load_problem(problem)
    assert _dry_run_asked(RunRequest(loaded, resume=True)) is True  # the run's own (context.json)
    assert _dry_run_asked(RunRequest(loaded, resume=True, dry_run=False)) is False  # --no-dry-run wins
    assert _dry_run_asked(RunRequest(loaded)) is False  # a fresh run: not dry unless asked
    # The run dialog's Resume: unticked is asked for explicitly, so the run's own setting cannot surprise.
    assert "--no-dry-run" in RunOptions(resume=True).flags() and "--no-dry-run" not in RunOptions().flags()
    assert "--dry-run" in RunOptions(resume=True, dry_run=True).flags()
