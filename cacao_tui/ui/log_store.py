"""Bounded memory of log lines, per branch and run-wide, so scope and filter changes can redraw.

The Log widget itself is bounded too (max_lines); this keeps the recent history of each
branch so switching the selection does not lose a quiet branch's lines to a noisy one.
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

from cacao_tui.engine.events import LogLine
from cacao_tui.ui.formatting import LEVEL_LETTERS, fmt_clock
from cacao_tui.ui.run_view import Selection

RUN_LINES = 5_000
BRANCH_LINES = 2_000


class LogEntry(NamedTuple):
    """A tuple of str/int/None: the garbage collector stops tracking it, so tens of thousands
    kept in the rings do not lengthen full collections (which stall the event loop)."""

    branch: str | None
    iteration: int | None
    level: str
    text: str  # the formatted line as shown

    @classmethod
    def from_event(cls, e: LogLine) -> LogEntry:
        where = e.branch or "master"
        if e.iteration is not None:
            where = f"{where}/{e.iteration}"
        message = e.message.replace("\r", "").replace("\n", " ⏎ ")
        return cls(
            e.branch, e.iteration, e.level, f"{fmt_clock(e.ts)} {LEVEL_LETTERS.get(e.level, '?')} {where}: {message}"
        )

    @classmethod
    def progress(cls, e: object, text: str) -> list[LogEntry]:
        """A progress line of the headless renderer (a block of lines: one entry each), kept with
        the branch and iteration of its event so a selection's Log shows its own."""
        call = getattr(e, "call", None) or getattr(e, "progress", None)  # an LLM call's event names its caller there
        branch = getattr(e, "branch", None) or getattr(call, "branch", None)
        iteration = getattr(e, "iteration", None) or getattr(call, "iteration", None)
        stamp = fmt_clock(getattr(e, "ts", 0.0))
        return [cls(branch if isinstance(branch, str) else None, iteration if isinstance(iteration, int) else None,
                    "info", f"{stamp} · {line.rstrip()}") for line in text.split("\n") if line.strip()]  # fmt: skip

    def in_scope(self, selection: Selection) -> bool:
        if selection.branch is None:
            return True
        if self.branch != selection.branch:
            return False
        return selection.iteration is None or self.iteration is None or self.iteration == selection.iteration


def matches(entry: LogEntry, needle: str) -> bool:
    """Case-insensitive substring filter (``needle`` already lower-cased)."""
    return not needle or needle in entry.text.lower()


class LogStore:
    def __init__(self, run_lines: int = RUN_LINES, branch_lines: int = BRANCH_LINES) -> None:
        self._run: deque[LogEntry] = deque(maxlen=run_lines)
        self._branches: dict[str, deque[LogEntry]] = {}
        self._branch_lines = branch_lines
        self.total = 0

    def add(self, entry: LogEntry) -> None:
        self.total += 1
        self._run.append(entry)
        if entry.branch is not None:
            ring = self._branches.get(entry.branch)
            if ring is None:
                ring = self._branches[entry.branch] = deque(maxlen=self._branch_lines)
            ring.append(entry)

    def lines(self, selection: Selection, needle: str = "") -> list[str]:
        source = self._run if selection.branch is None else self._branches.get(selection.branch, ())
        needle = needle.lower()
        return [e.text for e in source if e.in_scope(selection) and matches(e, needle)]
