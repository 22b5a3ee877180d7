"""Runs started as processes of their own: they outlive whoever started them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cacao_tui.runs.last_run import last_run
from cacao_tui.runs.launcher import LAUNCH_LOG, LaunchRefused, RunOptions, run_argv, start_detached, validate
from cacao_tui.store.layout import RunLayout
from tests.pathenv import child_pythonpath
from tests.runs.run_files import copy_problem, started, write_log


def test_options_become_the_command_lines_flags(tmp_path: Path) -> None:
    options = RunOptions(provider="replay", strategies=2, max_iter=3, max_depth=1, path_budget=0, timeout_s=2.5,
                         gpus=[0, 1], budget_usd=1.0, dry_run=True, single_shot=True)  # fmt: skip
    assert run_argv(tmp_path, options) == [
        "--dir", str(tmp_path), "--no-ui", "--provider", "replay", "--strategies", "2", "--max-iter", "3",
        "--max-depth", "1", "--path-budget", "0", "--timeout", "2.5", "--gpus", "0,1", "--budget-usd", "1",
        "--dry-run", "--single-shot", "--no-clean",
    ]  # fmt: skip
    assert run_argv(tmp_path, RunOptions(resume=True))[-2:] == ["--resume", "--no-dry-run"]  # unticked: asked


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (RunOptions(provider="replay", max_depth=0), "--max-depth: must be at least 1"),
        (RunOptions(provider="nonsense"), "unknown provider 'nonsense'"),
        (RunOptions(provider="openai"), "needs OPENAI_API_KEY"),
    ],
)
def test_refused_before_anything_is_archived(
    tmp_path: Path, options: RunOptions, words: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    problem = copy_problem(tmp_path)
    write_log(problem, [started()])
    with pytest.raises(LaunchRefused, match=words):
        start_detached(problem, options)
    assert (problem / "output" / "run.jsonl").is_file() and not (problem / "archive").exists()


def test_a_run_that_needs_a_gpu_is_refused_on_a_machine_without_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not a dry run, and nvidia-smi lists no GPU: one line naming the way out, before the earlier
    run is archived (it used to archive it, then the run died at once and the results were hidden)."""
    no_gpu = tmp_path / "bin"
    no_gpu.mkdir()
    monkeypatch.setenv("PATH", str(no_gpu))  # no nvidia-smi here
    problem = copy_problem(tmp_path)
    write_log(problem, [started()])
    with pytest.raises(LaunchRefused, match=r"^no NVIDIA GPU found \(nvidia-smi lists none\); tick Dry run"):
        start_detached(problem, RunOptions(provider="replay"))
    assert (problem / "output" / "run.jsonl").is_file() and not (problem / "archive").exists()
    smi = no_gpu / "nvidia-smi"  # one GPU 0: GPU 3 does not exist
    smi.write_text("#!/bin/sh\necho '0, FAKE GPU, 9.0'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{no_gpu}{os.pathsep}/usr/bin{os.pathsep}/bin")
    with pytest.raises(LaunchRefused, match=r"GPU 3 does not exist on this machine \(GPUs: 0\); set GPUs"):
        validate(problem, RunOptions(provider="replay", gpus=[3]))
    validate(problem, RunOptions(provider="replay", gpus=[3], dry_run=True))  # a dry run needs none


def test_replay_needs_a_recorded_session(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    (problem / "session.jsonl").unlink()
    with pytest.raises(LaunchRefused, match="no recorded session"):
        validate(problem, RunOptions(provider="replay", dry_run=True))


def test_a_live_run_is_not_archived_under_it(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    write_log(problem, [started()])
    # A real holder: the flock, as a run takes it.
    code = ("import time; from pathlib import Path; from cacao_tui.store.run_lock import acquire_run_lock;"
            f"acquire_run_lock(Path({str(problem)!r})); print('held', flush=True); time.sleep(30)")  # fmt: skip
    locker = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": child_pythonpath()})  # fmt: skip
    try:
        assert locker.stdout is not None and locker.stdout.readline().strip() == "held"
        with pytest.raises(LaunchRefused, match="another run is using this problem directory"):
            start_detached(problem, RunOptions(provider="replay", dry_run=True))
        assert not (problem / "archive").exists() and not (problem / "output" / LAUNCH_LOG).exists()
    finally:
        locker.kill()
        locker.wait()


@pytest.mark.slow
def test_the_run_outlives_the_process_that_started_it(tmp_path: Path) -> None:
    """An 'app' process starts a replay dry run and exits at once; the run goes on to its end
    in a session of its own, writing output/launch.log and its run log; the earlier run is archived."""
    problem = copy_problem(tmp_path)
    write_log(problem, [started()])  # an earlier run: archived, not mixed in
    code = (
        "import sys; from pathlib import Path; from cacao_tui.runs.launcher import RunOptions, start_detached;"
        f"s = start_detached(Path({str(problem)!r}), RunOptions(provider='replay', dry_run=True, max_iter=2));"
        "print(s.pid, flush=True)"
    )
    app = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": child_pythonpath()}, cwd=tmp_path)  # fmt: skip
    assert app.returncode == 0, app.stderr
    pid = int(app.stdout.split()[0])
    assert os.getsid(pid) == pid != os.getsid(0)  # its own session: no terminal's hangup reaches it
    layout = RunLayout(problem)
    assert (problem / "archive" / "output_1" / "run.jsonl").is_file()
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not last_run(problem).finished:
        time.sleep(0.5)
    last = last_run(problem)
    assert last.status == "ok", (layout.output / LAUNCH_LOG).read_text()
    assert last.live is None and last.dry_run and last.provider == "replay"
    log = (layout.output / LAUNCH_LOG).read_text()
    assert log.startswith("== ") and "started from the app: cacao --dir" in log and "--no-clean" in log
    events = [json.loads(line) for line in layout.run_log.read_text().splitlines()]
    assert events[0]["type"] == "run_started" and events[-1]["type"] == "run_finished"
    assert (layout.final_results).is_file()


def _wait_finished(problems: list[Path], timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not all(last_run(p).finished for p in problems):
        time.sleep(0.5)


@pytest.mark.slow
def test_two_problems_run_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runs started one after the other are both live at once, and both finish."""
    monkeypatch.chdir(tmp_path)
    first, second = copy_problem(tmp_path, "one"), copy_problem(tmp_path, "two")
    a = start_detached(first, RunOptions(provider="replay", dry_run=True, max_iter=2))
    b = start_detached(second, RunOptions(provider="replay", dry_run=True, max_iter=2))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (last_run(first).live and last_run(second).live):
        time.sleep(0.2)
    assert last_run(first).live and last_run(second).live, "the two runs were not live together"
    _wait_finished([first, second])
    assert [last_run(p).status for p in (first, second)] == ["ok", "ok"]
    assert a.process.wait(timeout=30) == 0 and b.process.wait(timeout=30) == 0


@pytest.mark.gpu
@pytest.mark.slow
def test_two_real_replays_on_the_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """GPU: two replays of mmul started from the launcher at once (not dry runs) both time a
    valid kernel; on one GPU the per-device lock makes them take turns, never fail."""
    monkeypatch.chdir(tmp_path)
    first, second = copy_problem(tmp_path, "one"), copy_problem(tmp_path, "two")
    started = [start_detached(p, RunOptions(provider="replay", max_iter=2, gpus=[0])) for p in (first, second)]
    _wait_finished([first, second], timeout=900)
    for problem, run in zip((first, second), started, strict=True):
        last = last_run(problem)
        assert last.status == "ok" and not last.dry_run, (problem / "output" / LAUNCH_LOG).read_text()[-2000:]
        assert last.best_ms is not None and last.best_ms > 0
        assert run.process.wait(timeout=30) == 0
