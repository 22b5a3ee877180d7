"""Split runs through the real command: ``--phase llm`` / ``--phase gpu`` alternated, and
``--gpu-submit`` with a FAKE ``sbatch`` that runs the GPU phase here (the FAKE tuner behind the
tuner seam, a FAKE ``nvidia-smi`` for the GPU phase; the model's phase needs neither)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from cacao_tui.store.layout import RunLayout
from cacao_tui.store.phases import read_phase_state
from cacao_tui.tuners import TUNER_ENV
from tests.engine.phase_site import quick_fake_tuner
from tests.engine.test_phases import SETTINGS, plain, results, run_phase  # noqa: F401 - the plain run's fixture
from tests.pathenv import child_pythonpath
from tests.ui.fake_run_site.fake_cases_tuner import write_fake_nvidia_smi

FAKE_SBATCH = """#!/bin/sh
# FAKE sbatch (tests only): runs --wrap's command here and waits, as 'sbatch --wait' does.
while [ $# -gt 0 ]; do
  case "$1" in --wrap) shift; cmd="$1" ;; esac
  shift
done
echo "Submitted batch job 4242 (fake)"
exec /bin/sh -c "$cmd"
"""


def _env(tmp_path: Path, *, gpu: bool) -> dict[str, str]:
    """No LLM key; the FAKE tuner chosen; a FAKE nvidia-smi (and sbatch) on PATH when ``gpu``."""
    bin_dir = tmp_path / ("bin-gpu" if gpu else "bin")
    bin_dir.mkdir(exist_ok=True)
    path = os.environ.get("PATH", "")
    if gpu:
        write_fake_nvidia_smi(bin_dir)
        sbatch = bin_dir / "sbatch"
        sbatch.write_text(FAKE_SBATCH)
        sbatch.chmod(0o755)
    else:  # the model's machine: an nvidia-smi that lists no GPU
        smi = bin_dir / "nvidia-smi"
        smi.write_text("#!/bin/sh\nexit 0\n")
        smi.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if "API_KEY" not in k and k != "LLM_PROVIDER"}
    env.update({
        "PATH": f"{bin_dir}{os.pathsep}{path}",
        "PYTHONPATH": f"{quick_fake_tuner.SITE}{os.pathsep}{child_pythonpath()}",
        TUNER_ENV: quick_fake_tuner.NAME,
        "PYTHONUNBUFFERED": "1",
    })  # fmt: skip
    return env


def cacao(problem: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "cacao_tui", "--dir", problem.name, "--no-ui", *args]
    return subprocess.run(argv, cwd=problem.parent, env=env, capture_output=True, text=True, timeout=600)


def _settings() -> list[str]:
    return ["--max-iter", str(SETTINGS["max_iter"]), "--max-depth", str(SETTINGS["max_depth"]),
            "--strategies", str(SETTINGS["n_strategies"])]  # fmt: skip


SMALL = {"max_iter": 5, "max_depth": 1, "n_strategies": 4}  # depth 1, not the default 2: the resumed phases keep it


def test_phases_alternate_through_the_command(mmul_dir: Path, tmp_path: Path) -> None:
    reference = tmp_path / "plain" / "mmul"
    shutil.copytree(mmul_dir, reference)
    assert run_phase(reference, None, resumed=False, **SMALL).status == "ok"
    model_env, gpu_env = _env(tmp_path, gpu=False), _env(tmp_path, gpu=True)
    flags = ["--max-depth", "1"]  # on the first phase only (with 2, b1-tiling would branch at its 4th)
    first = cacao(mmul_dir, "--provider", "replay", "--phase", "llm", *flags, env=model_env)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    last = first.stdout.strip().splitlines()[-1]
    assert last == "run waiting: 3 branches wait for the GPU; continue with: cacao --dir mmul --resume --phase gpu"
    # The GPU node has no key for the run's provider and no network: the GPU phase needs neither.
    context = RunLayout(mmul_dir).context
    data = json.loads(context.read_text())
    data["settings"]["provider"], data["settings"]["model"] = "anthropic", "claude-sonnet-4-5"
    context.write_text(json.dumps(data))
    gpu = cacao(mmul_dir, "--resume", "--phase", "gpu", env=gpu_env)
    assert gpu.returncode == 0, gpu.stdout[-3000:] + gpu.stderr[-3000:]
    assert gpu.stdout.strip().splitlines()[-1].endswith("continue with: cacao --dir mmul --resume --phase llm")
    assert "the GPU phase (no LLM call)" in gpu.stdout and "LLM" not in gpu.stderr
    # A phase without --resume would archive the waiting run and start anew: one line, exit 2, nothing written.
    before = sorted(p.name for p in mmul_dir.iterdir())
    again = cacao(mmul_dir, "--provider", "replay", "--phase", "llm", env=model_env)
    said = (again.stdout + again.stderr).strip().splitlines()
    assert again.returncode == 2 and len(said) == 1, said
    assert "a split run waits for its model phase; continue it with: cacao --dir mmul --resume --phase llm" in said[0]
    assert sorted(p.name for p in mmul_dir.iterdir()) == before  # no archive/ of the waiting run
    data["settings"]["provider"], data["settings"]["model"] = "replay", "replay"
    context.write_text(json.dumps(data))
    for _ in range(40):
        state = read_phase_state(RunLayout(mmul_dir))
        assert state is not None
        if state.next_phase is None:
            break
        env = gpu_env if state.next_phase == "gpu" else model_env
        step = cacao(mmul_dir, "--resume", "--phase", state.next_phase, env=env)  # the run's own settings
        assert step.returncode == 0, step.stdout[-3000:] + step.stderr[-3000:]
    assert "run ok" in step.stdout
    assert results(mmul_dir) == results(reference)
    names = [b["name"] for b in results(mmul_dir)["branches"]]
    assert not any(n.startswith("b1-tiling.") and "polish" not in n for n in names)  # depth 1 held


def test_gpu_submit_runs_the_gpu_phase_through_the_template(mmul_dir: Path, tmp_path: Path, plain: dict) -> None:  # noqa: F811
    env = _env(tmp_path, gpu=True)  # the FAKE sbatch and the GPU phase's FAKE nvidia-smi
    template = "sbatch --wait --gres=gpu:1 --wrap {cmd}"
    run = cacao(mmul_dir, "--provider", "replay", "--gpu-submit", template, *_settings(), env=env)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "gpu-submit: Submitted batch job 4242 (fake)" in run.stdout and "run ok" in run.stdout
    log = RunLayout(mmul_dir).run_log.read_text()
    assert "gpu-submit: Submitted batch job 4242 (fake)" in log  # the template's output is in the run log
    assert '"phase":"gpu"' in log  # the GPU phases ran (their events are in the run log too)
    assert results(mmul_dir) == plain
    assert not (mmul_dir / "output.lock").exists() or not json.loads((mmul_dir / "output.lock").read_text() or "{}")


def test_a_failing_submission_ends_the_run_with_one_line(mmul_dir: Path, tmp_path: Path) -> None:
    env = _env(tmp_path, gpu=False)
    run = cacao(mmul_dir, "--provider", "replay", "--gpu-submit", "false {cmd}", *_settings(), env=env)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    last = run.stdout.strip().splitlines()[-1]
    assert last.startswith("run failed: gpu-submit: the command exited with status 1") and "Traceback" not in run.stderr


def test_bad_phase_flags_are_one_line_and_exit_2(mmul_dir: Path, tmp_path: Path) -> None:
    env = _env(tmp_path, gpu=False)
    cases = [
        (["--phase", "gpu"], "--phase gpu continues a run: give --resume"),
        (["--phase", "llm", "--dry-run"], "a --dry-run times nothing"),
        (["--gpu-submit", "sbatch --wait"], "the template has no {cmd}"),
        (["--gpu-submit", "sh -c {cmd}", "--phase", "llm"], "it does not go with --phase"),
        (["--phase", "llm", "--samples", "2"], "--samples probes each attempt on the GPU"),
        (["--best", "--phase", "llm"], "--phase belongs to a run"),
    ]
    for args, expected in cases:
        out = cacao(mmul_dir, "--provider", "replay", *args, env=env)
        assert out.returncode == 2 and expected in out.stderr, (args, out.stderr)
        assert len(out.stderr.strip().splitlines()) <= 2 and "Traceback" not in out.stderr
    assert not RunLayout(mmul_dir).output.exists()  # nothing written
