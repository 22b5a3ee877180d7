"""Per-branch best-time history: each branch's best so far after each of its iterations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cacao_tui.store.state import BranchSummary
from cacao_tui.ui.plots.plot_view import COLORS, Draw


@dataclass(frozen=True)
class Series:
    name: str
    iterations: list[int]
    best_ms: list[float]  # the best so far, after each timed iteration (never rises)


def history_series(branches: list[BranchSummary]) -> list[Series]:
    """One series per branch with at least one timed iteration, in the order given."""
    out = []
    for b in branches:
        xs, ys = [], []
        best: float | None = None
        for point in sorted(b.timeline, key=lambda p: p.iteration):
            if point.time_ms is None or point.time_ms <= 0:
                continue
            best = point.time_ms if best is None else min(best, point.time_ms)
            xs.append(point.iteration)
            ys.append(best)
        if xs:
            out.append(Series(b.name, xs, ys))
    return out


LOG_SPAN = 4.0  # when the largest time drawn is this many times the smallest, the y axis is logarithmic


def history_draw(series: list[Series], reference_ms: float | None = None) -> Draw | None:
    """The plot; a logarithmic time axis when the times span more than LOG_SPAN x (a slow reference
    would otherwise press every branch's points onto the bottom rows)."""
    if not series:
        return None
    drawn = [t for s in series for t in s.best_ms] + ([reference_ms] if reference_ms else [])
    log = max(drawn) > LOG_SPAN * min(drawn)

    def draw(plt: Any, width: int, height: int) -> None:
        if log:
            plt.yscale("log")
        for i, s in enumerate(series):
            label = s.name if len(s.name) <= 18 else s.name[:17] + "…"
            plt.plot(s.iterations, s.best_ms, marker="braille", color=COLORS[i % len(COLORS)], label=label)
        if reference_ms:
            last = max(max(s.iterations) for s in series)
            plt.plot([1, max(last, 2)], [reference_ms, reference_ms], marker="dot", color="gray", label="reference")
        scale = ", log scale" if log else ""
        plt.title(f"best time so far per branch (ms{scale}, lower is better)")
        plt.xlabel("iteration")
        plt.xticks(sorted({x for s in series for x in s.iterations}))

    return draw
