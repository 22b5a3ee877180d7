"""Class 6 (paths, disk full): writes stay inside the problem; a full disk is one line and --resume goes on.

ENOSPC is simulated without a mount: the run's process gets an ``os.fsync`` that fails
with ENOSPC from its Nth call on (every state write fsyncs), which is what a disk that
fills mid-run looks like to the atomic writer.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cacao_tui.store import atomic
from cacao_tui.store.archive import ArchiveError, prepare_output
from cacao_tui.store.atomic import DiskFull, write_json_atomic
from tests.pathenv import child_pythonpath

ROOT = Path(__file__).resolve().parents[2]
FULL_AFTER = textwrap.dedent(
    """
    import errno, os, runpy, sys
    limit = int(sys.argv.pop(1))
    calls = [0]
    real = os.fsync
    def fsync(fd):
        calls[0] += 1
        if calls[0] > limit:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd)
    os.fsync = fsync
    sys.argv = ["cacao", *sys.argv[1:]]
    runpy.run_module("cacao_tui", run_name="__main__")
    """
)


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": child_pythonpath(), "PYTHONUNBUFFERED": "1"}


@pytest.fixture
def mmul(tmp_path: Path) -> Path:
    target = tmp_path / "mmul"
    shutil.copytree(ROOT / "problems" / "mmul", target, ignore=shutil.ignore_patterns("output", "archive", "*.lock"))
    return target


def run(problem: Path, *args: str, full_after: int | None = None) -> subprocess.CompletedProcess:
    argv = ["--dir", str(problem), "--provider", "replay", "--no-ui", "--dry-run", *args]
    cmd = [sys.executable, "-c", FULL_AFTER, str(full_after), *argv] if full_after is not None else [
        sys.executable, "-m", "cacao_tui", *argv]  # fmt: skip
    return subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=600, cwd=problem.parent)


def all_state_parses(problem: Path) -> int:
    n = 0
    for path in (problem / "output").rglob("*.json"):
        json.loads(path.read_text())
        n += 1
    assert not list((problem / "output").rglob("*.tmp")), "a temp file was left behind"
    return n


@pytest.mark.parametrize("name", ["output", "archive"])
def test_a_link_to_elsewhere_is_refused_in_one_line(mmul: Path, tmp_path: Path, name: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious.txt").write_text("not cacao's\n")
    if name == "archive":
        (mmul / "output").mkdir()
        (mmul / "output" / "final_results.json").write_text("{}\n")
    (mmul / name).symlink_to(elsewhere)
    res = run(mmul)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "symbolic link" in lines[0] and str(mmul / name) in lines[0]
    assert sorted(p.name for p in elsewhere.iterdir()) == ["precious.txt"]
    if name == "archive":
        assert (mmul / "output" / "final_results.json").read_text() == "{}\n"


def test_a_link_inside_output_stops_a_resume(mmul: Path, tmp_path: Path) -> None:
    assert run(mmul).returncode == 0
    branch = next((mmul / "output" / "branches").iterdir())
    target = tmp_path / "outside"
    target.mkdir()
    shutil.move(str(branch / "iter1"), str(target / "iter1"))
    (branch / "iter1").symlink_to(target / "iter1")
    res = run(mmul, "--resume")
    assert res.returncode == 2 and "symbolic link inside output/" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_the_archiver_refuses_links(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "output").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ArchiveError, match="symbolic link"):
        prepare_output(tmp_path, resume=False, no_clean=False)


def test_the_atomic_writer_never_follows_a_planted_temp_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    target = tmp_path / "out" / "state.json"
    target.parent.mkdir()
    import threading

    planted = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    planted.symlink_to(victim)
    write_json_atomic(target, {"ok": True})
    assert victim.read_text() == "keep me\n" and json.loads(target.read_text()) == {"ok": True}
    # and a link at the target itself is replaced, not written through
    target.unlink()
    target.symlink_to(victim)
    write_json_atomic(target, {"ok": 2})
    assert victim.read_text() == "keep me\n" and not target.is_symlink()


def test_disk_full_latches_and_keeps_the_old_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "state.json"
    write_json_atomic(path, {"v": 1})
    heard: list[DiskFull] = []
    atomic.on_disk_full(heard.append)

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    try:
        monkeypatch.setattr(atomic.os, "fsync", full)
        with pytest.raises(DiskFull) as err:
            write_json_atomic(path, {"v": 2})
        assert str(err.value) == f"{path}: No space left on device"
        monkeypatch.undo()
        with pytest.raises(DiskFull):  # latched: no later write is attempted
            write_json_atomic(tmp_path / "other.json", {"v": 3})
        assert json.loads(path.read_text()) == {"v": 1} and len(heard) == 1
        assert not (tmp_path / "other.json").exists() and not list(tmp_path.glob(".*.tmp"))
    finally:
        atomic.reset_disk_full()
        atomic._listeners.remove(heard.append)


def test_a_full_disk_mid_run_is_one_line_exit_1_and_resume_finishes(mmul: Path) -> None:
    full = run(mmul, full_after=50)
    assert full.returncode == 1, full.stdout[-2000:] + full.stderr[-2000:]
    lines = [ln for ln in full.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, full.stderr[-3000:]
    assert "disk full" in lines[0] and "No space left on device" in lines[0] and "--resume" in lines[0]
    assert "Traceback" not in full.stdout + full.stderr
    assert all_state_parses(mmul) > 0
    assert not (mmul / "output" / "final_results.json").exists()
    resumed = run(mmul, "--resume")
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    assert "run ok" in resumed.stdout
    final = json.loads((mmul / "output" / "final_results.json").read_text())
    assert final["complete"] is True
    all_state_parses(mmul)
