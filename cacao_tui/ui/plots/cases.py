"""Per-case bars: the best kernel's speedup over each case's own reference, each bar labelled with
its value, on an axis from 0 with round ticks, and the 1x line (as fast as the reference)."""

from __future__ import annotations

import math
from typing import Any

from cacao_tui.store.state import CaseOutcome
from cacao_tui.ui.plots.plot_view import Draw


def nice_ticks(top: float, most: int = 6) -> list[float]:
    """0 up to at least ``top`` in steps of 1, 2, 2.5 or 5 times a power of ten, at most ``most`` ticks."""
    if top <= 0:
        return [0.0, 1.0]
    for exponent in range(math.floor(math.log10(top)) - 1, math.floor(math.log10(top)) + 2):
        for mantissa in (1, 2, 2.5, 5):
            step = mantissa * 10**exponent
            count = math.ceil(top / step - 1e-9)
            if count + 1 <= most:
                return [round(k * step, 10) for k in range(count + 1)]
    return [0.0, top]


def tick_label(value: float) -> str:
    return f"{value:g}"


def case_bars_draw(cases: list[CaseOutcome]) -> Draw | None:
    timed = [c for c in cases if c.speedup is not None]
    if not timed:
        return None
    names = [c.name for c in timed]
    values = [round(float(c.speedup or 0.0), 3) for c in timed]
    top = max(*values, 1.0) * 1.2  # room after the longest bar for its label

    def draw(plt: Any, width: int, height: int) -> None:
        # As many ticks as the axis has room for, each label ~6 cells apart: plotext drops labels
        # that collide, and which it dropped varied from one drawing to the next.
        axis = width - max(len(n) for n in names) - 4
        ticks = nice_ticks(top, most=max(2, min(6, axis // 6)))
        plt.bar(names, values, orientation="horizontal", color="green", width=0.4)
        plt.vertical_line(1.0, color="gray")
        plt.xlim(0, ticks[-1])
        plt.xticks(ticks, [tick_label(t) for t in ticks])
        for position, value in enumerate(values, start=1):
            plt.text(f" ×{value:.3g}", value, position, color="green", alignment="left")
        plt.title("speedup per case")  # the gray line: 1x, as fast as the case's reference

    return draw
