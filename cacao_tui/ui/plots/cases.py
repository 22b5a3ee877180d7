"""Per-case bars: the best kernel's speedup over each case's own reference."""

from __future__ import annotations

from typing import Any

from cacao_tui.store.state import CaseOutcome
from cacao_tui.ui.plots.plot_view import Draw


def case_bars_draw(cases: list[CaseOutcome]) -> Draw | None:
    timed = [c for c in cases if c.speedup is not None]
    if not timed:
        return None
    names = [c.name for c in timed]
    values = [round(float(c.speedup or 0.0), 3) for c in timed]

    def draw(plt: Any, width: int, height: int) -> None:
        plt.bar(names, values, orientation="horizontal", color="green", width=0.4)
        plt.vertical_line(1.0, color="gray")
        plt.title("speedup per case (x)")

    return draw
