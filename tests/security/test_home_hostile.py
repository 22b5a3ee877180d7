"""Issue 23, items 4, 5, 7 and 8 (the home screen): one hostile problem no longer takes the list
down, a run is signalled only while it holds its lock, and a run's strings reach no terminal raw.

Before: deep JSON in run.jsonl (RecursionError), a 400-digit best_ms (OverflowError) or a 10^30
pid in output.lock (OverflowError in os.kill) ended the refresh worker and the app, exit 0; ``S``
signalled whatever pid output.lock named (an unrelated process was killed); a
``run_finished.status`` holding an escape sequence retitled the terminal.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from cacao_tui.engine.control import SteeringError
from cacao_tui.runs.catalog import scan_problems
from cacao_tui.runs.liveness import live_run
from cacao_tui.runs.remote_control import stop_run
from cacao_tui.store.layout import RunLayout
from cacao_tui.ui.home.home_app import HomeApp
from cacao_tui.ui.home.home_screen import HomeScreen
from cacao_tui.ui.home.rows import describe, row_cells
from tests.runs.run_files import copy_problem, hold_note, start_holder, started, write_log

ESC = "\x1b]0;pwned\x07\x1b[2J"


def _log_lines(problem: Path, *lines: str) -> None:
    layout = RunLayout(problem)
    layout.output.mkdir(parents=True, exist_ok=True)
    with layout.run_log.open("a", encoding="utf-8") as f:
        f.write(started().model_dump_json() + "\n")
        for line in lines:
            f.write(line + "\n")


def hostile_folder(folder: Path) -> Path:
    """Five problems whose run files each broke (or would hang) the home screen, and one ordinary one."""
    folder.mkdir()
    deep = copy_problem(folder, "deep_json")
    _log_lines(deep, '{"type": "run_finished", "status": ' + "[" * 100_000 + "]" * 100_000 + "}")
    huge = copy_problem(folder, "huge_number")
    _log_lines(huge, json.dumps({"type": "run_finished", "status": "ok"})[:-1] + ', "best_ms": ' + "9" * 400 + "}")
    _log_lines(huge, '{"type": "new_best", "run_best": true, "time_ms": 1' + "0" * 400 + "}")
    pid = copy_problem(folder, "huge_pid")
    write_log(pid, [started()])
    note = {"pid": 10**30, "host": socket.gethostname(), "started": "2026-01-02T03:04:05+00:00", "command": "x"}
    (pid / "output.lock").write_text(json.dumps(note))
    escapes = copy_problem(folder, "escapes")
    _log_lines(escapes, json.dumps({"type": "run_finished", "status": ESC, "message": ESC, "best_ms": 1.0}))
    fifo = copy_problem(folder, "fifo_summary")
    _log_lines(fifo, json.dumps({"type": "run_finished", "status": "ok"}))
    summary = RunLayout(fifo).branch("b1").iteration(1).tune_summary
    summary.parent.mkdir(parents=True)
    os.mkfifo(summary)  # the home screen's GPU time reads every tuning's summary.json
    copy_problem(folder, "plain")
    return folder


def test_the_catalog_reads_every_hostile_problem(tmp_path: Path) -> None:
    entries = {e.key: e for e in scan_problems(hostile_folder(tmp_path / "problems"))}
    assert sorted(entries) == ["deep_json", "escapes", "fifo_summary", "huge_number", "huge_pid", "plain"]
    assert entries["huge_pid"].last.live is None
    assert entries["huge_number"].last.best_ms is None  # no float holds it: not shown, not a crash
    for entry in entries.values():
        cells = row_cells(entry)
        text = " ".join(str(c) for c in cells) + str(describe(entry))
        assert "\x1b" not in text and "\x07" not in text, entry.key
    assert "\\x1b]0;pwned" in str(row_cells(entries["escapes"])[3])


def test_the_home_screen_survives_every_hostile_problem(tmp_path: Path) -> None:
    folder = hostile_folder(tmp_path / "problems")

    async def go() -> None:
        app = HomeApp(folder)
        async with app.run_test(size=(120, 30)) as pilot:
            for _ in range(400):
                await pilot.pause(0.05)
                if isinstance(app.screen, HomeScreen) and app.home.scans >= 2:
                    break
            assert app.is_running and app.home.scans >= 2, "the refresh worker died"
            assert app.home.table.row_count == 6
            for key in ("deep_json", "escapes", "fifo_summary", "huge_number", "huge_pid", "plain"):
                app.home.table.get_row(key)

    asyncio.run(go())


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)


def test_a_stale_note_is_not_a_live_run_and_its_pid_is_never_signalled(tmp_path: Path) -> None:
    """A SIGKILLed run's note plus pid reuse, or a note anyone wrote: the pid is an unrelated process."""
    problem = copy_problem(tmp_path)
    write_log(problem, [started()])
    bystander = _sleeper()
    try:
        hold_note(problem, bystander.pid)
        assert live_run(problem) is None
        assert stop_run(problem) is None
        assert bystander.poll() is None, "an unrelated process was signalled"
    finally:
        bystander.kill()
        bystander.wait()


def test_a_lock_held_by_another_process_than_its_note_names_signals_nobody(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    holder = start_holder(problem)
    bystander = _sleeper()
    try:
        note = json.loads((problem / "output.lock").read_text())
        note["pid"] = bystander.pid  # the note rewritten to name someone else
        (problem / "output.lock").write_text(json.dumps(note))
        live = live_run(problem)
        assert live is not None and not live.verified
        with pytest.raises(SteeringError, match="nothing was signalled"):
            stop_run(problem)
        assert bystander.poll() is None and holder.poll() is None
    finally:
        for proc in (holder, bystander):
            proc.kill()
            proc.wait()


def test_the_process_that_holds_the_lock_is_signalled(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    holder = start_holder(problem)
    try:
        assert stop_run(problem) == holder.pid
        assert holder.wait(timeout=10) == -signal.SIGTERM
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def test_a_pid_beyond_any_process_is_no_holder(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    for pid in (10**30, -1, 0, 2**31, True, "1"):
        note = {"pid": pid, "host": socket.gethostname(), "started": "x", "command": "x"}
        (problem / "output.lock").write_text(json.dumps(note))
        assert live_run(problem) is None and stop_run(problem) is None
    assert os.getpid() > 0
