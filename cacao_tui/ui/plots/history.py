"""Per-branch best-time history: each branch's best so far after each of its iterations, as a step
line (a best holds until an iteration beats it), with the reference and the physical floor as
level lines and each branch's final best labelled: "is it getting faster" at a glance."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cacao_tui.store.state import BranchSummary
from cacao_tui.ui.plots.plot_view import COLORS, Draw, with_legend


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


def steps(xs: list[int], ys: list[float]) -> tuple[list[float], list[float]]:
    """The points of a step line: level until the next x, then straight down (or up) to its y."""
    out_x: list[float] = []
    out_y: list[float] = []
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        if i:
            out_x.append(x)
            out_y.append(ys[i - 1])
        out_x.append(x)
        out_y.append(y)
    return out_x, out_y


def short_ms(ms: float) -> str:
    return f"{ms:.3g} ms" if ms >= 0.1 else f"{ms * 1000:.3g} µs"


LOG_SPAN = 4.0  # when the largest time drawn is this many times the smallest, the y axis is logarithmic


def history_draw(series: list[Series], reference_ms: float | None = None, floor_ms: float | None = None) -> Draw | None:
    """The plot; a logarithmic time axis when the times span more than LOG_SPAN x (a slow reference
    would otherwise press every branch's points onto the bottom rows). The legend goes under the
    plot, never over the lines."""
    if not series:
        return None
    levels = [(v, name) for v, name in ((reference_ms, "reference"), (floor_ms, "floor")) if v]
    drawn = [t for s in series for t in s.best_ms] + [v for v, _ in levels]
    log = max(drawn) > LOG_SPAN * min(drawn)
    first = min(min(s.iterations) for s in series)
    last = max(max(s.iterations) for s in series)
    right = max(last, first + 1)

    def draw(plt: Any, width: int, height: int) -> None:
        if log:
            plt.yscale("log")
        for i, s in enumerate(series):
            xs, ys = steps(s.iterations, s.best_ms)
            if xs[-1] < last:  # a branch that stopped early: its best holds to the plot's end
                xs.append(last)
                ys.append(ys[-1])
            plt.plot(xs, ys, marker="braille", color=COLORS[i % len(COLORS)])
            plt.text(short_ms(s.best_ms[-1]), xs[-1], ys[-1], color=COLORS[i % len(COLORS)], alignment="right")
        for value, name in levels:
            plt.plot([first, right], [value, value], marker="dot", color="gray" if name == "reference" else "red")
        scale = ", log scale" if log else ""
        plt.title(f"best time so far per branch (ms{scale}, lower is better)")
        plt.xlabel("iteration")
        plt.xticks(sorted({x for s in series for x in s.iterations}))

    legend = [(s.name if len(s.name) <= 18 else s.name[:17] + "…", COLORS[i % len(COLORS)], "━")
              for i, s in enumerate(series)]  # fmt: skip
    legend += [(f"{name} {short_ms(v)}", "gray" if name == "reference" else "red", "·") for v, name in levels]
    return with_legend(draw, legend)
