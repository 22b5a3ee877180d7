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
import time
from dataclasses import dataclass, field
from pathlib import Path

from cacao_tui.runs.launcher import LAUNCH_HEADER, LAUNCH_LOG, log_tail
from cacao_tui.runs.liveness import LiveRun, live_run
from cacao_tui.store.archive import archived_runs
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import FinalResults
from ktt.capped_read import finite_number, parse_json, read_bytes_capped
from ktt.checked_numbers import MAX_SECONDS, within
from ktt.terminal_text import safe_line

JUST_STARTED_S = 30.0  # a launch log with nothing after its first line, younger than this: still starting
HEAD_BYTES = 64 * 1024
TAIL_BYTES = 256 * 1024
MAX_RESULTS_BYTES = 8 * 1024 * 1024

# Status words, shown on the home screen as they are.
NOT_RUN = "not run"
RUNNING = "running"
STARTING = "starting"  # output.lock is held but the run log has no run_started yet
# The log has no end and no process holds the directory (killed, or the machine went down): the run
# was interrupted, as a stopped one is (``LastRun.died`` tells them apart); --resume continues it.
INTERRUPTED = "interrupted"
UNREADABLE = "unreadable"  # its files could not be read (the row says why)
FAILED_START = "failed to start"  # a launch log but no run log: the run process ended before its first event


@dataclass
class LastRun:
    status: str
    best_ms: float | None = None
    speedup: float | None = None  # the primary case's (without cases: the only one)
    score: float | None = None  # with cases: the best's geometric-mean score, the figure that ranks it
    when: float | None = None  # the last thing the run wrote (seconds since the epoch)
    dry_run: bool = False
    provider: str | None = None
    gpus: list[int] = field(default_factory=list)
    live: LiveRun | None = None
    message: str | None = None
    died: bool = False  # interrupted without ending its log: its process is gone (killed, crashed)
    history: list[float] = field(default_factory=list)  # the run's best time each time it improved
    tokens: int = 0  # input + output, the run's totals so far
    cost_usd: float | None = None
    gpu_s: float | None = None  # the tunings' wall time, summed (tune/summary.json of every iteration)
    # The run before this one (archive/output_N), when this one failed to start: its result stays in view.
    previous: LastRun | None = None
    previous_where: str | None = None

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


def _final_results(path: Path) -> FinalResults | None:
    try:  # a regular file, not a link, capped, opened without blocking
        return FinalResults.model_validate_json(read_bytes_capped(path, MAX_RESULTS_BYTES, follow_links=False))
    except (OSError, ValueError):
        return None


def last_run(problem_dir: Path) -> LastRun:
    layout = RunLayout(problem_dir)
    live = live_run(problem_dir)
    if live is None and not layout.run_log.exists() and (layout.output / LAUNCH_LOG).is_file():
        return _failed_start(layout)
    return _read_run(layout.output, live)


def _read_run(output: Path, live: LiveRun | None) -> LastRun:
    """How the run whose files are in ``output`` (output/, or an archive/output_N) went."""
    slices = _read_slices(output / "run.jsonl")
    if slices is None:
        return LastRun(STARTING if live else NOT_RUN, live=live)
    head, tail, mtime = slices
    events = _events(tail)
    started = [e for e in _events(head) + events if e["type"] == "run_started"]
    info = started[-1] if started else {}
    result = LastRun(
        RUNNING if live else INTERRUPTED,
        died=not live,
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
        result.died = False
        result.status = (_text(finished.get("status"), 40) or "finished").replace("_", " ")
        result.message = _text(finished.get("message"))
        result.best_ms, result.speedup = _number(finished.get("best_ms")), _number(finished.get("speedup"))
        result.score = _number(finished.get("score"))
    def key(e: dict) -> tuple[object, ...]:
        return e.get("ts"), e.get("seq"), e.get("type")

    seen = {key(e) for e in events}  # head and tail overlap in a small log: each event once
    everything = [e for e in _events(head) if key(e) not in seen] + events
    bests = [e for e in everything if e["type"] == "new_best" and e.get("run_best")]
    result.history = [t for e in bests if (t := _number(e.get("time_ms"))) is not None]
    if bests and result.best_ms is None:
        last = bests[-1]
        result.best_ms, result.speedup = _number(last.get("time_ms")), _number(last.get("speedup"))
        result.score = _number(last.get("score"))
    calls = [e for e in events if e["type"] == "llm_call" and isinstance(e.get("run"), dict)]
    if calls:  # each call carries the run's totals so far
        run = calls[-1]["run"]
        result.tokens = int(_number(run.get("input_tokens")) or 0) + int(_number(run.get("output_tokens")) or 0)
        result.cost_usd = _number(run.get("cost_usd"))
    if result.finished:
        final = _final_results(output / "final_results.json")
        if final is not None and final.best is not None:
            result.best_ms = final.best.time_ms
            result.speedup = final.best.speedup
            result.score = final.best.score if final.cases else None
        if final is not None and final.tokens:
            result.tokens = int(final.tokens.get("input", 0)) + int(final.tokens.get("output", 0))
        if final is not None and final.cost_usd is not None:
            result.cost_usd = final.cost_usd
    result.gpu_s = gpu_seconds(output, mtime)
    return result


_gpu_cache: dict[Path, tuple[float, float | None]] = {}  # output dir -> (run log mtime, seconds)
MAX_SUMMARY_BYTES = 4 * 1024 * 1024


def gpu_seconds(output: Path, stamp: float) -> float | None:
    """The wall time of every tuning of the run (tune/summary.json's wall_s), summed; None when
    none was timed. Read again only when the run's log changed (``stamp``: its mtime)."""
    cached = _gpu_cache.get(output)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    total, found = 0.0, False
    branches = output / "branches"
    for summary in sorted(branches.glob("*/iter*/tune/summary.json")) if branches.is_dir() else []:
        with contextlib.suppress(OSError, ValueError):
            data = parse_json(read_bytes_capped(summary, MAX_SUMMARY_BYTES, follow_links=False))
            wall = within(data.get("wall_s"), 0.0, MAX_SECONDS, low_open=True) if isinstance(data, dict) else None
            if wall is not None:  # 1e12 s (277,777,777 h) or -5 is no tuning's wall time
                total, found = total + wall, True
    if len(_gpu_cache) > 2000:
        _gpu_cache.clear()
    _gpu_cache[output] = (stamp, total if found else None)
    return total if found else None


def _failed_start(layout: RunLayout) -> LastRun:
    """A run started from the app that ended before its first event (no GPU, a bad key...): why,
    from its launch log, and the result of the run before it, which it had archived."""
    log = layout.output / LAUNCH_LOG
    tail = log_tail(log, lines=6)
    header = max((i for i, line in enumerate(tail) if line.startswith(LAUNCH_HEADER)), default=-1)
    said = tail[header + 1 :]  # what the run printed after the app's line that started it
    when = None
    with contextlib.suppress(OSError):
        when = log.stat().st_mtime
    if not said and when is not None and time.time() - when < JUST_STARTED_S:
        return LastRun(STARTING, when=when)  # started a moment ago: not holding its lock yet
    result = LastRun(FAILED_START, when=when, message=said[-1] if said else None)
    archived = archived_runs(layout)
    if archived:
        path = archived[-1][1]
        previous = _read_run(path, None)
        if previous.status != NOT_RUN:
            result.previous, result.previous_where = previous, f"archive/{path.name}"
    return result
