"""One problem as a row of the home screen's table, and its longer description below it."""

from __future__ import annotations

import contextlib
import time

from rich.text import Text

from cacao_tui.llm.usage import cost_words, is_illustrative
from cacao_tui.runs.catalog import ProblemEntry
from cacao_tui.runs.last_run import FAILED_START, NOT_RUN, RUNNING, STARTING, UNREADABLE, LastRun
from cacao_tui.ui.formatting import (
    NONE,
    fit_path,
    fmt_cost,
    fmt_count,
    fmt_ms,
    fmt_result,
    fmt_seconds,
    safe_text,
    spark_text,
)
from ktt.problem.errors import display_path

COLUMNS = (
    ("name", "problem"),
    ("ref", "ref"),
    ("cases", "cases"),
    ("status", "last run"),
    ("best", "best"),
    ("when", "when"),
)
# From WIDE_AT columns the table becomes a dashboard: the run's best-time history, its tokens,
# cost and GPU time, with the space to show them (the last column's width takes what is left).
WIDE_AT = 140
HISTORY_CELLS = 24
WIDE_COLUMNS = (
    ("name", "problem"),
    ("ref", "ref"),
    ("cases", "cases"),
    ("status", "last run"),
    ("best", "best"),
    ("history", "best time, each improvement"),
    ("tokens", "tokens"),
    ("cost", "cost"),
    ("gpu", "GPU time"),
    ("when", "when"),
)
SORTS = ("name", "last run", "best", "when")  # s cycles them

STATUS_LOOK: dict[str, tuple[str, str]] = {
    RUNNING: ("▶", "bold cyan"),
    STARTING: ("▶", "cyan"),
    "ok": ("✓", "green"),
    "budget": ("$", "yellow"),
    "no result": ("∅", "yellow"),
    "failed": ("!", "red"),
    FAILED_START: ("!", "red"),
    "interrupted": ("■", "yellow"),
    "waiting": ("◇", "magenta"),  # a split run's phase ended; the other phase continues it (--phase)
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


def best_text(last: LastRun) -> str:
    """The best's figure as every view labels it: score ×S with cases, else ×S (or the time)."""
    if last.speedup is None and last.score is None:
        return fmt_ms(last.best_ms)
    return fmt_result(last.speedup, last.score)


def row_cells(entry: ProblemEntry, now: float | None = None, *, wide: bool = False) -> tuple[object, ...]:
    """The row's cells; a problem whose files defeat them gets a row that says so (the list survives it)."""
    try:
        return _cells(entry, now, wide)
    except Exception as exc:  # one hostile problem must not take the home screen down
        why = Text(safe_text(f"cannot be shown: {type(exc).__name__}")[:60], style="red")
        cells: list[object] = [NONE] * len(WIDE_COLUMNS if wide else COLUMNS)
        cells[0], cells[1], cells[3] = Text(safe_text(entry.key)), Text("invalid", style="red"), why
        return tuple(cells)


def name_cell(entry: ProblemEntry, bold: bool = False) -> Text:
    """The problem's directory name, then problem.yaml's ``name:`` dimmed where it differs: two
    problems whose names are alike, or cut by the column, still read apart (a folder holds each
    directory name once)."""
    text = Text(safe_text(entry.key), style="bold" if bold else "")
    if entry.name != entry.key:
        text.append(f" {safe_text(entry.name)}", style="dim")
    return text


def _cells(entry: ProblemEntry, now: float | None, wide: bool) -> tuple[object, ...]:
    last = entry.last
    name = name_cell(entry, bold=last.status == RUNNING)
    extra: tuple[object, ...] = ()
    if wide:
        history = Text(spark_text(last.history, HISTORY_CELLS), style="green")
        if last.history:
            history.append(f" {fmt_ms(last.history[-1])}", style="dim")
        tokens = fmt_count(last.tokens) if last.tokens else NONE
        cost: str | Text = fmt_cost(last.cost_usd)
        if is_illustrative(last.provider) and (last.tokens or last.cost_usd):  # the header's * explains it
            cost = Text(f"{cost}*", style="italic")
        extra = (history, tokens, cost, fmt_seconds(last.gpu_s))
    if entry.error:
        cells = (name, Text("invalid", style="red"), NONE, status_text(last), NONE)
        return (*cells, *extra, fmt_when(last.when, now))
    best: str | Text = best_text(last)
    previous = last.previous
    if last.best_ms is None and previous is not None and previous.best_ms is not None:
        # A run that failed to start archived the one before it: that result stays in view, marked.
        best = Text(f"{best_text(previous)} prev", style="dim")
    return (
        name,
        REFERENCE_NAMES.get(entry.reference or "", entry.reference or NONE),
        str(entry.cases) if entry.cases is not None else NONE,
        status_text(last),
        best,
        *extra,
        fmt_when(last.when, now),
    )


def sort_key(entry: ProblemEntry, by: str) -> tuple[object, ...]:
    """Rows in ``by`` order (SORTS): name; last run (live first); best (fastest first); when (newest first)."""
    last = entry.last
    if by == "last run":
        order = (RUNNING, STARTING, FAILED_START, "failed", "interrupted", "waiting", "no result", "budget", "ok",
                 NOT_RUN)  # fmt: skip
        return (order.index(last.status) if last.status in order else len(order), entry.name)
    if by == "best":
        figure = last.score if last.score is not None else last.speedup
        return (figure is None, -(figure or 0.0), last.best_ms if last.best_ms is not None else 0.0, entry.name)
    if by == "when":
        return (last.when is None, -(last.when or 0.0), entry.name)
    return (entry.key,)  # as the name column reads: the directory first


def describe(entry: ProblemEntry, width: int = 78) -> Text:
    """The panel under the table: where it is, what is wrong with it, what its run is doing.
    ``width``: the panel's; the path is cut from the left to fit on the name's line."""
    last = entry.last
    text = Text()
    text.append(safe_text(entry.name), style="bold")
    room = max(10, width - len(entry.name) - 2)
    text.append(f"  {fit_path(safe_text(display_path(entry.directory)), room)}", style="dim")
    if entry.error:
        text.append(f"\n✗ {safe_text(entry.error)}", style="red")
    else:
        cases = f"{entry.cases} case{'s' if entry.cases != 1 else ''}"
        text.append(f"\n{entry.reference} reference · {cases}")
    if entry.error:  # r would only repeat the error: the editor opens its YAML to fix it
        text.append("\ne edits it (its YAML first) · c checks it", style="dim")
    if last.status == NOT_RUN:
        if not entry.error:
            text.append("\nnot run yet · r runs it", style="dim")
        return text
    text.append("\nlast run: ")
    text.append_text(status_text(last))
    if last.provider:
        text.append(f" · {safe_text(last.provider)}")
    if last.best_ms is not None:
        text.append(f" · best {fmt_ms(last.best_ms)} {best_text(last)}")
    if last.tokens or last.cost_usd:
        spent = f"{fmt_count(last.tokens)} tokens, {fmt_cost(last.cost_usd)}"
        text.append(f" · {cost_words(spent, last.provider)}")
    if last.when is not None:
        with contextlib.suppress(OverflowError, OSError, ValueError):
            text.append(f" · {time.strftime('%Y-%m-%d %H:%M', time.localtime(last.when))}", style="dim")
    if last.live is not None:
        text.append(f"\nheld by {last.live.describe()}", style="cyan")
        text.append("\nenter attaches · S stops the whole run", style="dim")
    elif last.died:
        text.append("\nits process ended without finishing · R resumes it", style="yellow")
    elif last.status == "waiting":
        text.append("\na split run between phases · R runs the phase it waits for", style="magenta")
    if last.message:
        text.append(f"\n{safe_text(last.message)[:300]}", style="red" if last.status == FAILED_START else "dim")
    previous = last.previous
    if previous is not None:
        text.append(f"\nthe run before ({last.previous_where}): ", style="dim")
        text.append_text(status_text(previous))
        if previous.best_ms is not None:
            text.append(f" · best {fmt_ms(previous.best_ms)} {best_text(previous)}")
    return text
