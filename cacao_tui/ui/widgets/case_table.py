"""The per-case table of a problem with several cases, and the score line above it.

Each case is tuned on its own and judged against its own reference time; the score is the
geometric mean of the per-case speedups, and there is none when a case has no valid result.
The results view and the Tuning tab both show it through this module, so they agree.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Protocol

from rich.console import Console, Group, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from cacao_tui.ui.formatting import NONE, fmt_config, fmt_ms, fmt_speedup, safe_text
from ktt.reference_times import NO_BASELINE

CASE_COLUMNS = ("case", "status", "best", "reference", "speedup", "budget", "valid", "config")


class CaseRow(Protocol):
    """What a case row needs: store.state.CaseOutcome and ktt.protocol.CaseResult both have it."""

    name: str
    status: str
    time_ms: float | None
    reference_ms: float | None
    reference_source: str | None
    speedup: float | None
    budget_s: float | None
    evaluated: int
    valid: int
    config: dict[str, int | float | str] | None


def reference_cell(c: CaseRow) -> str:
    """The case's denominator and where it came from (measured, or seeded by hand), or "no baseline"."""
    if c.reference_ms is None:
        return NO_BASELINE if c.reference_source == NO_BASELINE else NONE
    return fmt_ms(c.reference_ms) + (f" ({safe_text(c.reference_source)})" if c.reference_source else "")


def case_table(cases: Sequence[CaseRow]) -> Table:
    """One row per case, in declared order (the first is the primary): its own best over its own reference."""
    table = Table(*CASE_COLUMNS, box=None, padding=(0, 1), header_style="bold", expand=False)
    for c in cases:
        table.add_row(
            safe_text(c.name),
            Text(safe_text(c.status), style="green" if c.status == "ok" else "red"),
            fmt_ms(c.time_ms),
            reference_cell(c),
            fmt_speedup(c.speedup),
            f"{c.budget_s:g} s" if c.budget_s is not None else NONE,
            f"{c.valid}/{c.evaluated}",
            safe_text(fmt_config(c.config or {})),
        )
    return table


def score_line(score: float | None, cases: Sequence[CaseRow]) -> Text:
    """'score ×S: the geometric mean of the N cases' speedups', or why there is none."""
    text = Text("score ", style="bold")
    if score is not None:
        text.append(fmt_speedup(score), style="bold green")
        text.append(f": the geometric mean of the {len(cases)} cases' speedups", style="dim")
        return text
    text.append(NONE)
    unbased = [c.name for c in cases if c.reference_source == NO_BASELINE]
    missing = [c.name for c in cases if c.speedup is None and c.name not in unbased]
    if unbased and not missing:
        names = ", ".join(safe_text(n) for n in unbased)
        text.append(f": none, no baseline for {names} (null in reference_time.json)", style="yellow")
    elif missing:
        names = ", ".join(safe_text(n) for n in missing)
        text.append(f": none, no valid result for {names} (the geometric mean needs every case)", style="yellow")
    else:
        text.append(": none (the geometric mean needs a valid result on every case)", style="yellow")
    return text


def natural_width(renderable: RenderableType) -> int:
    """The cells a renderable takes when nothing squeezes it (a table at its columns' full width)."""
    console = Console(width=10_000, file=io.StringIO())
    return Measurement.get(console, console.options, renderable).maximum


def case_block(cases: Sequence[CaseRow], score: float | None, title: str = "") -> RenderableType:
    """The score line (with a title before it) and the table, as one renderable."""
    head = Text(f"{title} · ", style="bold") if title else Text()
    head.append_text(score_line(score, cases))
    return Group(head, case_table(cases))


class CaseTable(Static):
    """Shown only for a problem with several cases; hidden (taking no room) otherwise."""

    DEFAULT_CSS = """
    CaseTable {
        height: auto;
        padding: 0 1;
        display: none;
    }
    CaseTable.-shown {
        display: block;
    }
    """

    def show_cases(self, cases: Sequence[CaseRow], score: float | None, title: str = "", extra: str = "") -> None:
        if len(cases) < 2:
            self.clear()
            return
        block = case_block(cases, score, title)
        shown = Group(block, Text(extra, style="dim")) if extra else block
        # Its natural width (and the padding): a scrolling parent shows what a narrow pane cannot.
        self.styles.width = natural_width(shown) + 2
        self.update(shown)
        self.add_class("-shown")

    def clear(self) -> None:
        self.update("")
        self.remove_class("-shown")
