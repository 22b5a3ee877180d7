"""Issue 23, item 12 and the "Also" line about output.lock: what a killed process leaves is cleaned
on the next start, the hand-seeded reference time survives a kill at any point of archiving, and
a refused run leaves nothing behind.

Before: a ``.tmp`` state file survived ``--resume``; ``ktt-check-*`` directories with kernels stayed
in TMPDIR; a SIGKILL between archiving output/ and copying the seed lost the seed (3 of 40 kills);
a run refused for an output/ link (or with nothing to resume) still left output.lock.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from bounds_problem import ktt_check_argv, make_problem

from cacao_tui.store.archive import NEXT_OUTPUT, prepare_output
from cacao_tui.store.atomic import remove_crash_leftovers
from cacao_tui.store.layout import RunLayout
from tests.pathenv import child_pythonpath
from tests.runs.run_files import copy_problem, started, write_log

SEED = {"reference_time_us": 411.28, "cases": {"t100": None}}


def _dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(proc.stdout)


def test_temp_files_of_dead_writers_are_removed_and_a_live_ones_kept(tmp_path: Path) -> None:
    out = tmp_path / "output"
    (out / "branches" / "b1").mkdir(parents=True)
    dead, live = _dead_pid(), os.getpid()
    stale = [out / f".master.json.{dead}.140000000000.tmp", out / "branches" / "b1" / ".summary.json.k3j_9xq2",
             out / "branches" / "b1" / f".branch.json.{dead}.1.tmp"]  # fmt: skip
    kept = [out / f".branch_config.json.{live}.7.tmp", out / "master.json", out / "notes.tmp"]
    for path in stale + kept:
        path.write_text("{}")
    assert remove_crash_leftovers(out) == len(stale)
    assert not any(p.exists() for p in stale) and all(p.exists() for p in kept)


def test_resume_cleans_the_output_it_continues_in(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    layout = RunLayout(problem)
    write_log(problem, [started()])
    # "An earlier run here": --resume may start (a valid master.json; since issue 27 a resume reads
    # every state file first, and an unusable context.json is refused in one line instead).
    layout.master.write_text("{}")
    leftover = layout.output / f".master.json.{_dead_pid()}.1.tmp"
    leftover.write_text("half a state file")
    env = {**os.environ, "PYTHONPATH": child_pythonpath(), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    argv = [sys.executable, "-m", "cacao_tui", "--dir", str(problem), "--resume", "--no-ui", "--dry-run",
            "--provider", "replay"]  # fmt: skip
    result = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert not leftover.exists()


def test_a_check_removes_the_work_dirs_of_dead_checks(tmp_path: Path) -> None:
    root = make_problem(tmp_path)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    dead = [scratch / f"ktt-check-{_dead_pid()}-abc", scratch / f"ktt-pool-{_dead_pid()}-def"]
    live = [scratch / f"ktt-check-{os.getpid()}-ghi", scratch / "ktt-check-notapid-x"]
    for d in dead + live:
        d.mkdir()
        (d / "kernels.cu").write_text("// a model's kernel\n")
    argv = ktt_check_argv(root, tmp_path / "cache", "--sample", "1")
    env = {**os.environ, "PYTHONPATH": child_pythonpath(), "TMPDIR": str(scratch)}
    result = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert not any(d.exists() for d in dead) and all(d.exists() for d in live)
    assert sorted(p.name for p in scratch.iterdir()) == sorted(d.name for d in live)  # its own removed too


_KILL_AT = """
import os, sys
from pathlib import Path
import cacao_tui.store.archive as archive
n, when = int(sys.argv[2]), sys.argv[3]
calls = [0]
def dying(real):
    def call(*args, **kwargs):
        calls[0] += 1
        if calls[0] == n and when == "before":
            os._exit(9)
        out = real(*args, **kwargs)
        if calls[0] == n and when == "after":
            os._exit(9)
        return out
    return call
os.rename = dying(os.rename)  # the archive's renames (output/ aside, the new one in)
os.replace = dying(os.replace)  # the seed's atomic write
archive.prepare_output(Path(sys.argv[1]), resume=False, no_clean=False)
"""


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("n", [1, 2, 3, 4])  # the seed's write, output/ moved aside, the new one in, none
def test_the_seed_survives_a_kill_at_any_point_of_archiving(n: int, when: str, tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    layout = RunLayout(problem)
    write_log(problem, [started()])
    layout.reference_time.write_text(json.dumps(SEED))
    env = {**os.environ, "PYTHONPATH": child_pythonpath()}
    subprocess.run([sys.executable, "-c", _KILL_AT, str(problem), str(n), when], env=env, timeout=120)
    prepared = prepare_output(problem, resume=False, no_clean=False)  # the next start
    assert json.loads(layout.reference_time.read_text()) == SEED, (n, when)
    assert not (problem / NEXT_OUTPUT).exists()
    runs = [p for p in (problem / "archive").glob("output_*") if (p / "run.jsonl").is_file()]
    assert len(runs) == 1, "the earlier run was archived once, whatever the kill"
    assert prepared.layout.output.is_dir()


def test_a_run_refused_for_nothing_to_resume_leaves_no_lock_file(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    env = {**os.environ, "PYTHONPATH": child_pythonpath(), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    argv = [sys.executable, "-m", "cacao_tui", "--dir", str(problem), "--resume", "--no-ui", "--dry-run",
            "--provider", "replay"]  # fmt: skip
    result = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert result.returncode == 2 and "nothing to resume" in result.stderr
    assert not (problem / "output.lock").exists()
    assert not (problem / "output").exists() or not any((problem / "output").iterdir())
