"""One problem as a row of the home screen's table, and its longer description below it."""

from __future__ import annotations

import contextlib
import time

from rich.text import Text

from cacao_tui.runs.catalog import ProblemEntry
from cacao_tui.runs.last_run import KILLED, NOT_RUN, RUNNING, STARTING, UNREADABLE, LastRun
from cacao_tui.ui.formatting import NONE, fmt_ms, fmt_speedup, safe_text
from ktt.problem.errors import display_path

COLUMNS = (
    ("name", "problem"),
    ("ref", "ref"),
    ("cases", "cases"),
    ("status", "last run"),
    ("best", "best"),
    ("when", "when"),
)

STATUS_LOOK: dict[str, tuple[str, str]] = {
    RUNNING: ("▶", "bold cyan"),
    STARTING: ("▶", "cyan"),
    "ok": ("✓", "green"),
    "budget": ("$", "yellow"),
    "no result": ("∅", "yellow"),
    "failed": ("!", "red"),
    "interrupted": ("■", "yellow"),
    KILLED: ("✗", "red"),
    UNREADABLE: ("?", "red"),
    NOT_RUN: ("·", "dim"),
}
REFERENCE_NAMES = {"cuda": "cuda", "cpu_c": "c", "python": "py"}


def fmt_when(ts: float | None, now: float | None = None) -> str:
    if ts is None:
        return NONE
    now = time.time() if now is None else now
    try:  # a file's time is anyone's: one far outside what localtime takes is shown as unknown
        if abs(now - ts) < 20 * 3600:
            return time.strftime("%H:%M", time.localtime(ts))
        return time.strftime("%m-%d", time.localtime(ts))
    except (OverflowError, OSError, ValueError):
        return NONE


def status_text(last: LastRun) -> Text:
    icon, style = STATUS_LOOK.get(last.status, ("?", ""))
    text = Text(f"{icon} {safe_text(last.status)}", style=style)  # a word from the run's log
    if last.dry_run and last.status != NOT_RUN:
        text.append(" dry", style="dim")
    if last.status in (RUNNING, STARTING) and last.gpus and not last.dry_run:
        text.append(f" GPU {','.join(map(str, last.gpus))}", style="dim")
    return text


def row_cells(entry: ProblemEntry, now: float | None = None) -> tuple[object, ...]:
    """The row's cells; a problem whose files defeat them gets a row that says so (the list survives it)."""
    try:
        return _cells(entry, now)
    except Exception as exc:  # one hostile problem must not take the home screen down
        why = Text(safe_text(f"cannot be shown: {type(exc).__name__}")[:60], style="red")
        return (Text(safe_text(entry.key)), Text("invalid", style="red"), NONE, why, NONE, NONE)


def _cells(entry: ProblemEntry, now: float | None) -> tuple[object, ...]:
    last = entry.last
    name = Text(safe_text(entry.name), style="bold" if last.status == RUNNING else "")
    if entry.error:
        return (name, Text("invalid", style="red"), NONE, status_text(last), NONE, fmt_when(last.when, now))
    best = fmt_speedup(last.speedup) if last.speedup is not None else fmt_ms(last.best_ms)
    return (
        name,
        REFERENCE_NAMES.get(entry.reference or "", entry.reference or NONE),
        str(entry.cases) if entry.cases is not None else NONE,
        status_text(last),
        best,
        fmt_when(last.when, now),
    )


def describe(entry: ProblemEntry) -> Text:
    """The panel under the table: where it is, what is wrong with it, what its run is doing."""
    last = entry.last
    text = Text()
    text.append(safe_text(entry.name), style="bold")
    text.append(f"  {safe_text(display_path(entry.directory))}", style="dim")
    if entry.error:
        text.append(f"\n✗ {safe_text(entry.error)}", style="red")
    else:
        cases = f"{entry.cases} case{'s' if entry.cases != 1 else ''}"
        text.append(f"\n{entry.reference} reference · {cases}")
    if last.status == NOT_RUN:
        text.append("\nnot run yet · r runs it", style="dim")
        return text
    text.append("\nlast run: ")
    text.append_text(status_text(last))
    if last.provider:
        text.append(f" · {safe_text(last.provider)}")
    if last.best_ms is not None:
        text.append(f" · best {fmt_ms(last.best_ms)} {fmt_speedup(last.speedup)}")
    if last.when is not None:
        with contextlib.suppress(OverflowError, OSError, ValueError):
            text.append(f" · {time.strftime('%Y-%m-%d %H:%M', time.localtime(last.when))}", style="dim")
    if last.live is not None:
        text.append(f"\nheld by {last.live.describe()}", style="cyan")
        text.append("\nenter attaches · S stops the whole run", style="dim")
    elif last.status == KILLED:
        text.append("\nits process ended without finishing · R resumes it", style="yellow")
    if last.message:
        text.append(f"\n{safe_text(last.message)[:300]}", style="dim")
    return text
