"""A recording made in a dry run, replayed where kernels are timed, through the real command
(issue 30): the run goes to the end of what was recorded and ends `run ok` (kernels were timed),
no branch fails, no branch is created that the recording holds nothing of (the polish), and a
branch the timed run takes further than the dry run did ends as `recording ended`, named in the
verdict. On the CPU with the FAKE tuner (a fake nvidia-smi and the tuner seam, as the tmux tests
do); on a GPU with ktt (``gpu``-marked: scripts/gpu-check.sh, or the command in its docstring)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cacao_tui.store.atomic import read_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import BranchManifest, FinalResults
from cacao_tui.tuners import TUNER_ENV
from tests.engine.conftest import ROOT
from tests.pathenv import child_pythonpath
from tests.ui.fake_run_site import fake_cases_tuner


def _cacao(problem: Path, env: dict[str, str], *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cacao_tui", "--dir", str(problem), "--provider", "replay", "--no-ui", *args],
        capture_output=True, text=True, cwd=problem.parent, env=env, timeout=timeout,
    )  # fmt: skip


def replay_a_dry_run_recording(tmp_path: Path, env: dict[str, str], *timed: str, timeout: float) -> Path:
    """Record a dry run (the mmul demo session replayed with --dry-run writes its calls under
    output/llm), then replay that recording without --dry-run; check what issue 30 asks of it."""
    problem = tmp_path / "mmul"
    shutil.copytree(ROOT / "problems" / "mmul", problem, ignore=shutil.ignore_patterns("output", "archive"))
    dry = _cacao(problem, env, "--dry-run", timeout=timeout)
    assert dry.returncode == 0 and dry.stdout.rstrip().splitlines()[-1].startswith("run ok"), dry.stdout[-3000:]
    recording = tmp_path / "recording"
    shutil.copytree(problem / "output", recording)
    recorded = {p.parent.parent.name for p in (recording / "branches").glob("*/iter*/llm")}

    done = _cacao(problem, env, "--from", str(recording), *timed, timeout=timeout)
    out = done.stdout + done.stderr
    last = done.stdout.rstrip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0 and last.startswith("run ok"), out[-4000:]
    assert "Traceback" not in out
    layout = RunLayout(problem)
    final = read_model(layout.final_results, FinalResults)
    assert final.run_status == "ok" and final.best is not None and not final.dry_run
    ms = {n: read_model(layout.branch(n).manifest, BranchManifest) for n in layout.branch_names()}
    assert not [n for n, m in ms.items() if m.status == "failed"], {n: (m.status, m.stop_reason) for n, m in ms.items()}
    assert set(ms) <= recorded, set(ms) - recorded  # no branch the recording holds nothing of (no polish)
    ended = [n for n, m in ms.items() if (m.stop_reason or "").startswith("recording ended")]
    if ended:  # the timed run went further than the dry run somewhere: the verdict says where
        assert final.run_message is not None and final.run_message.startswith("the recording ended (")
        assert all(ms[n].status == "stopped" and n in final.run_message for n in ended[:4])
        assert "recording ended" in last
    return problem


def test_a_dry_run_recording_replayed_with_the_fake_tuner_runs_to_its_end(tmp_path: Path) -> None:
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    fake_cases_tuner.write_fake_nvidia_smi(bin_dir)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": f"{fake_cases_tuner.SITE}{os.pathsep}{child_pythonpath()}", TUNER_ENV: fake_cases_tuner.NAME}
    replay_a_dry_run_recording(tmp_path / "cpu", env, timeout=600)


@pytest.mark.gpu
def test_a_dry_run_recording_replays_on_the_gpu_to_the_end_of_what_it_recorded(tmp_path: Path) -> None:
    """On the H200: every recorded kernel compiled, validated, tuned (3 s a case) and profiled by ktt.

        PYTHONPATH=/tmp/site:. python3 -m pytest -m gpu -p no:cacheprovider -q \\
            tests/engine/test_replay_recording_end.py
    """
    env = {**os.environ, "PYTHONPATH": child_pythonpath()}
    problem = replay_a_dry_run_recording(tmp_path, env, "--timeout", "3", timeout=900)
    final = read_model(RunLayout(problem).final_results, FinalResults)
    assert final.best is not None and final.best.speedup is not None and final.best.speedup > 1.0
