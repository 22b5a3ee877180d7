"""Class 3: one run per problem directory.

Through the real command: a second run while the first holds the directory gets one line
naming the holder and exit 2 and archives nothing; a lock left by a SIGKILLed run is taken
over; --best and --check still work while a run holds the lock.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cacao_tui.store.archive import ArchiveError, prepare_output
from cacao_tui.store.run_lock import RunLocked, acquire_run_lock, lock_path, read_holder
from tests.pathenv import child_pythonpath

ROOT = Path(__file__).resolve().parents[2]
HOLD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from cacao_tui.store.run_lock import acquire_run_lock
    acquire_run_lock(Path(sys.argv[1]), command="cacao --dir test (holder)")
    print("held", flush=True)
    time.sleep(600)
    """
)


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": child_pythonpath(), "PYTHONUNBUFFERED": "1"}


@pytest.fixture
def mmul(tmp_path: Path) -> Path:
    target = tmp_path / "mmul"
    shutil.copytree(ROOT / "problems" / "mmul", target, ignore=shutil.ignore_patterns("output", "archive", "*.lock"))
    return target


def cacao(problem: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "cacao_tui", "--dir", str(problem), *args]
    return subprocess.run(argv, env=env(), capture_output=True, text=True, timeout=timeout, cwd=problem.parent)


def hold(problem: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(problem)], env=env(), stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def seed_earlier_run(problem: Path) -> None:
    out = problem / "output"
    out.mkdir()
    (out / "final_results.json").write_text('{"earlier": true}\n')


def test_a_second_run_is_refused_in_one_line_and_archives_nothing(mmul: Path) -> None:
    seed_earlier_run(mmul)
    holder = hold(mmul)
    try:
        second = cacao(mmul, "--provider", "replay", "--no-ui", "--dry-run")
        assert second.returncode == 2
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in second.stderr
        assert f"pid {holder.pid}" in lines[0] and "another run is using this problem directory" in lines[0]
        assert "cacao --dir test (holder)" in lines[0]
        assert not (mmul / "archive").exists()
        assert json.loads((mmul / "output" / "final_results.json").read_text()) == {"earlier": True}
        # Reading works meanwhile.
        assert cacao(mmul, "--check").returncode == 0
        best = cacao(mmul, "--best")
        assert "another run" not in best.stderr and "Traceback" not in best.stderr
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_left_by_a_killed_run_is_taken_over(mmul: Path) -> None:
    holder = hold(mmul)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    note = read_holder(lock_path(mmul))
    assert note is not None and note.pid == holder.pid and note.gone()
    run = cacao(mmul, "--provider", "replay", "--no-ui", "--dry-run")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert f"took over the lock of a run that ended without releasing it (pid {holder.pid}" in run.stderr
    assert (mmul / "output" / "final_results.json").exists()
    assert read_holder(lock_path(mmul)) is None  # a run that ends clears its note


def test_two_runs_at_once_one_is_refused(mmul: Path) -> None:
    argv = [sys.executable, "-m", "cacao_tui", "--dir", str(mmul), "--provider", "replay", "--no-ui", "--dry-run"]
    first = subprocess.Popen(argv, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while read_holder(lock_path(mmul)) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        second = cacao(mmul, "--provider", "replay", "--no-ui", "--dry-run")
        assert second.returncode == 2 and f"pid {first.pid}" in second.stderr
        out, err = first.communicate(timeout=600)
        assert first.returncode == 0, out[-2000:] + err[-2000:]
        assert "run ok" in out and not (mmul / "archive").exists()
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()


def test_the_archiver_itself_refuses_a_held_directory(tmp_path: Path) -> None:
    seed_earlier_run(tmp_path)
    holder = hold(tmp_path)
    try:
        with pytest.raises(ArchiveError, match=f"pid {holder.pid}"):
            prepare_output(tmp_path, resume=False, no_clean=False)
        with pytest.raises(RunLocked):
            acquire_run_lock(tmp_path)
        assert (tmp_path / "output" / "final_results.json").exists() and not (tmp_path / "archive").exists()
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_file_that_is_a_link_is_refused(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    problem = tmp_path / "p"
    problem.mkdir()
    (problem / "output.lock").symlink_to(victim)
    with pytest.raises(RunLocked, match="symbolic link"):
        acquire_run_lock(problem)
    assert victim.read_text() == "keep me\n"
