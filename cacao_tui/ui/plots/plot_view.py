"""A widget that draws a plotext figure at its own size, redrawn on resize and on new data.

plotext keeps one global figure; drawing happens on the event loop's thread only, so calls never
interleave. Colours: plotext's named 16-colour palette (fine in 16 and 256 colours); with
NO_COLOR (or a monochrome terminal) the figure is drawn without colour.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import plotext as plt
from rich.text import Text
from textual.widget import Widget

from cacao_tui.ui.formatting import safe_text

Draw = Callable[[Any, int, int], None]  # draw(plotext module, width, height)
LegendEntry = tuple[str, str, str]  # label, plotext colour, the mark drawn before it

COLORS = ("cyan", "magenta", "green", "yellow", "blue", "red", "white")


def with_legend(draw: Draw, entries: list[LegendEntry]) -> Draw:
    """``draw`` with a legend line under the figure (plotext's own sits on the plot, over the lines)."""
    draw.legend = entries  # type: ignore[attr-defined]
    return draw


def legend_line(entries: list[LegendEntry], width: int, color: bool) -> str:
    parts, used = [], 0
    for raw, colour, mark in entries:
        label = safe_text(raw)  # branch names come from the model
        piece = f"{mark * 2} {label}"
        if used + len(piece) + 2 > width:
            break
        parts.append(plt.colorize(mark * 2, colour) + f" {label}" if color else piece)
        used += len(piece) + 2
    return "  " + "  ".join(parts)


def render_figure(draw: Draw, width: int, height: int, color: bool = True) -> str:
    """The figure as text with ANSI colours (or without, for NO_COLOR and tests)."""
    legend: list[LegendEntry] = getattr(draw, "legend", [])
    plt.clf()
    plt.plotsize(max(width, 20), max(height - (1 if legend else 0), 6))
    plt.theme("clear")
    draw(plt, width, height)
    text = plt.build()
    plt.clf()
    if not color:
        text = plt.uncolorize(text)
    if not legend:
        return text
    # plotext ends its figure with a newline: the legend takes the row it reserved, not one more.
    return text.removesuffix("\n") + "\n" + legend_line(legend, width, color)


class PlotView(Widget):
    """Shows ``draw`` at the widget's size; ``set_draw`` swaps the figure."""

    DEFAULT_CSS = "PlotView { height: 1fr; min-height: 6; }"

    def __init__(self, draw: Draw | None = None, *, empty: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._draw = draw
        self._empty = empty
        self._cache: tuple[int, int, Text] | None = None

    def set_draw(self, draw: Draw | None, empty: str = "") -> None:
        self._draw = draw
        self._empty = empty
        self._cache = None
        self.refresh()

    def render(self) -> Text:
        width, height = self.content_size.width, self.content_size.height
        if self._draw is None or width < 10 or height < 4:
            return Text(self._empty, style="dim")
        if self._cache is not None and self._cache[:2] == (width, height):
            return self._cache[2]
        color = not self.app.no_color and self.app.console.color_system is not None
        text = Text.from_ansi(render_figure(self._draw, width, height, color), no_wrap=True)
        self._cache = (width, height, text)
        return text
