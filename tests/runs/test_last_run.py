"""The home screen's view of a problem's last run, read from its files without a lock."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cacao_tui.engine import events as ev
from cacao_tui.runs.catalog import scan_problems
from cacao_tui.runs.last_run import INTERRUPTED, NOT_RUN, RUNNING, last_run
from cacao_tui.store.run_lock import acquire_run_lock
from tests.runs.run_files import copy_problem, hold_note, started, write_log


def test_never_run(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    last = last_run(problem)
    assert (last.status, last.when, last.live) == (NOT_RUN, None, None)


def test_finished_run_status_and_best(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    write_log(problem, [
        started(),
        ev.NewBest(branch="b1", iteration=1, time_ms=2.0, speedup=1.5, run_best=True),
        ev.RunFinished(status="no_result", best_ms=None, message="nothing valid"),
    ], mtime=1_767_300_100.0)  # fmt: skip
    last = last_run(problem)
    assert last.status == "no result" and last.message == "nothing valid"
    assert last.when == 1_767_300_100.0 and last.dry_run and last.provider == "replay" and last.gpus == [0]
    assert (last.best_ms, last.speedup) == (2.0, 1.5)  # the log's best, no final_results.json


def test_a_run_whose_process_died_is_interrupted_not_running(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    write_log(problem, [started(), ev.MasterPhase(phase="dispatched")])
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    hold_note(problem, int(dead.stdout))  # a killed run leaves its note; its pid is gone
    last = last_run(problem)
    assert last.status == INTERRUPTED == "interrupted" and last.died and last.finished
    # A run stopped cleanly is interrupted too, and says it ended its log.
    write_log(problem, [started(), ev.RunFinished(status="interrupted", message="stopped; continue with --resume")])
    last = last_run(problem)
    assert last.status == "interrupted" and not last.died and last.message == "stopped; continue with --resume"


def test_a_held_lock_is_running_with_its_holder(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    write_log(problem, [started(gpus=[1]), ev.RunFinished(status="ok")])
    write_log(problem, [started(resumed=True, gpus=[1])])  # --resume appends a new part
    lock = acquire_run_lock(problem)
    try:
        last = last_run(problem)
    finally:
        lock.release()
    assert last.status == RUNNING and last.live is not None and last.live.holder.pid == os.getpid()
    assert last.live.verified and last.gpus == [1]


def test_the_resumed_part_decides(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    write_log(problem, [started(), ev.RunFinished(status="interrupted")])
    assert last_run(problem).status == "interrupted"
    write_log(problem, [started(resumed=True), ev.RunFinished(status="ok")])
    assert last_run(problem).status == "ok"


def test_another_hosts_note_counts_as_live(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    hold_note(problem, 1, host="some-other-host")
    live = last_run(problem).live
    assert live is not None and not live.here


def test_catalog_lists_problems_with_errors_and_skips_the_trash(tmp_path: Path) -> None:
    copy_problem(tmp_path, "b_ok")
    broken = copy_problem(tmp_path, "a_broken")
    (broken / "problem.yaml").write_text("name: a_broken\nreference: {type: nonsense}\n")
    copy_problem(tmp_path / ".trash", "gone")
    (tmp_path / "not_a_problem").mkdir()
    entries = scan_problems(tmp_path)
    assert [e.key for e in entries] == ["a_broken", "b_ok"]
    assert entries[0].error and "problem.yaml" in entries[0].error and entries[0].reference is None
    assert entries[1].error is None and entries[1].reference == "cuda" and entries[1].cases == 1


def test_a_log_between_the_head_and_the_tail_sizes_is_read_to_its_end(tmp_path: Path) -> None:
    """A log a little over the head's 64 KiB: its end (the run_finished line) is still read."""
    problem = copy_problem(tmp_path)
    filler = [ev.LogLine(message="x" * 500) for _ in range(150)]  # ~ 90 KiB
    write_log(problem, [started(), *filler, ev.RunFinished(status="ok", best_ms=1.0, speedup=2.0)])
    assert 64 * 1024 < (problem / "output" / "run.jsonl").stat().st_size < 256 * 1024
    assert last_run(problem).status == "ok"
    write_log(problem, [ev.LogLine(message="y" * 500) for _ in range(600)])  # past the tail's 256 KiB
    write_log(problem, [ev.RunFinished(status="failed")])
    assert last_run(problem).status == "failed"


def test_catalog_loads_a_problem_again_only_when_its_files_change(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path, "p")
    assert scan_problems(tmp_path)[0].error is None
    text = (problem / "problem.yaml").read_text()
    (problem / "problem.yaml").write_text(text + "\nnot: [valid\n")
    (entry,) = scan_problems(tmp_path)
    assert entry.error is not None and "problem.yaml" in entry.error
    (problem / "problem.yaml").write_text(text)
    assert scan_problems(tmp_path)[0].error is None


def test_a_run_that_failed_to_start_keeps_the_previous_result_in_view(tmp_path: Path) -> None:
    """The app archived the earlier run, then the new one died before its first event: the row
    says so (with the launch log's last line) and keeps the archived run's best beside it."""
    from cacao_tui.runs.last_run import FAILED_START, STARTING
    from cacao_tui.ui.home.rows import describe, row_cells
    from tests.runs.run_files import finished_run_events

    problem = copy_problem(tmp_path)
    write_log(problem, finished_run_events())
    os.rename(problem / "output", tmp_path / "earlier")
    (problem / "archive").mkdir()
    os.rename(tmp_path / "earlier", problem / "archive" / "output_1")
    (problem / "output").mkdir()
    log = problem / "output" / "launch.log"
    log.write_text("== 2026-01-02T03:04:05+00:00 started from the app: cacao --dir mmul --no-ui\n")
    assert last_run(problem).status == STARTING  # a moment after the start: not yet holding its lock
    log.write_text(log.read_text() + "cacao: no NVIDIA GPU found (nvidia-smi lists none); use --dry-run\n")
    last = last_run(problem)
    assert last.status == FAILED_START and last.message == "cacao: no NVIDIA GPU found (nvidia-smi lists none); " \
        "use --dry-run"  # fmt: skip
    assert last.previous is not None and last.previous_where == "archive/output_1"
    assert (last.previous.status, last.previous.best_ms, last.previous.speedup) == ("ok", 1.2, 3.25)
    (entry,) = scan_problems(tmp_path)
    cells = [str(c) for c in row_cells(entry)]
    assert cells[3] == "! failed to start" and cells[4] == "×3.25 prev"
    text = describe(entry).plain
    assert "no NVIDIA GPU found" in text and "the run before (archive/output_1): ✓ ok dry · best 1.20 ms ×3.25" in text
