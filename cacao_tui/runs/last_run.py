"""What a problem's last run did, read from its files without taking any lock.

``output/run.jsonl`` (the run's event log) says how the last part of the run ended
(``run_finished``) or that it has not ended; ``output/final_results.json`` holds the best
speedup of a finished run, the log's ``new_best`` events that of a live one. Only the head
and the tail of the log are read, so a run with a large log costs the same as a small one.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from cacao_tui.runs.liveness import LiveRun, live_run
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import FinalResults
from ktt.capped_read import finite_number, parse_json, read_bytes_capped
from ktt.terminal_text import safe_line

HEAD_BYTES = 64 * 1024
TAIL_BYTES = 256 * 1024
MAX_RESULTS_BYTES = 8 * 1024 * 1024

# Status words, shown on the home screen as they are.
NOT_RUN = "not run"
RUNNING = "running"
STARTING = "starting"  # output.lock is held but the run log has no run_started yet
KILLED = "killed"  # the log has no end and no process holds the directory: continue with --resume
UNREADABLE = "unreadable"  # its files could not be read (the row says why)


@dataclass
class LastRun:
    status: str
    best_ms: float | None = None
    speedup: float | None = None
    when: float | None = None  # the last thing the run wrote (seconds since the epoch)
    dry_run: bool = False
    provider: str | None = None
    gpus: list[int] = field(default_factory=list)
    live: LiveRun | None = None
    message: str | None = None

    @property
    def finished(self) -> bool:
        return self.status not in (RUNNING, STARTING, NOT_RUN)


def _read_slices(path: Path) -> tuple[bytes, bytes, float] | None:
    """(head, tail, mtime) of a regular file, never following a link."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        head = os.pread(fd, HEAD_BYTES, 0)
        start = max(0, st.st_size - TAIL_BYTES)
        tail = os.pread(fd, TAIL_BYTES, start)
        if start > 0:
            tail = tail.split(b"\n", 1)[-1]  # the first line is cut
        return head, tail, st.st_mtime
    except OSError:
        return None
    finally:
        os.close(fd)


def _events(chunk: bytes) -> list[dict]:
    out = []
    for raw in chunk.split(b"\n"):
        if not raw.strip():
            continue
        with contextlib.suppress(ValueError, UnicodeDecodeError):
            data = parse_json(raw)  # nesting too deep: a line like any other that does not parse
            if isinstance(data, dict) and isinstance(data.get("type"), str):
                out.append(data)
    return out


def _number(value: object) -> float | None:
    return finite_number(value)  # a 400-digit number is no float: None, not an OverflowError


def _text(value: object, limit: int = 300) -> str | None:
    """A string of the log, as one terminal-safe line (an escape sequence must not retitle the pane)."""
    return safe_line(value, limit) if isinstance(value, str) else None


def _gpus(value: object) -> list[int]:
    return [g for g in value[:64] if isinstance(g, int) and 0 <= g < 4096] if isinstance(value, list) else []


def _final_results(layout: RunLayout) -> FinalResults | None:
    try:
        return FinalResults.model_validate_json(read_bytes_capped(layout.final_results, MAX_RESULTS_BYTES,
                                                                  follow_links=False))  # fmt: skip
    except (OSError, ValueError):
        return None


def last_run(problem_dir: Path) -> LastRun:
    layout = RunLayout(problem_dir)
    live = live_run(problem_dir)
    slices = _read_slices(layout.run_log)
    if slices is None:
        return LastRun(STARTING if live else NOT_RUN, live=live)
    head, tail, mtime = slices
    events = _events(tail)
    started = [e for e in _events(head) + events if e["type"] == "run_started"]
    info = started[-1] if started else {}
    result = LastRun(
        RUNNING if live else KILLED,
        when=mtime,
        dry_run=bool(info.get("dry_run")),
        provider=_text(info.get("provider"), 80),
        gpus=_gpus(info.get("gpus")),
        live=live,
    )
    # The log's last part: after the last run_started (a --resume appends a new one).
    last_start = max((i for i, e in enumerate(events) if e["type"] == "run_started"), default=-1)
    part = events[last_start + 1 :]
    finished = next((e for e in reversed(part) if e["type"] == "run_finished"), None)
    if finished is not None and not live:
        result.status = (_text(finished.get("status"), 40) or "finished").replace("_", " ")
        result.message = _text(finished.get("message"))
        result.best_ms, result.speedup = _number(finished.get("best_ms")), _number(finished.get("speedup"))
    bests = [e for e in events if e["type"] == "new_best" and e.get("run_best")]
    if bests and result.best_ms is None:
        result.best_ms, result.speedup = _number(bests[-1].get("time_ms")), _number(bests[-1].get("speedup"))
    if result.finished:
        final = _final_results(layout)
        if final is not None and final.best is not None:
            result.best_ms = final.best.time_ms
            result.speedup = final.speedup if final.speedup is not None else final.best.speedup
    return result
