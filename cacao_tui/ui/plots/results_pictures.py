"""The pictures of the results view: the per-branch best-time history and the per-case bars.

``ResultsPictures.show(loaded)`` redraws both from a ``LoadedResults``; the results view calls it
on every (re)load, so the plot follows a live run.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal

from cacao_tui.store.results import LoadedResults
from cacao_tui.ui.plots.cases import case_bars_draw
from cacao_tui.ui.plots.history import history_draw, history_series
from cacao_tui.ui.plots.plot_view import PlotView


class ResultsPictures(Horizontal, can_focus=True):
    """Focusable, so Tab brings the pictures into view where the results view scrolls (80x24)."""

    DEFAULT_CSS = """
    ResultsPictures { height: 40vh; min-height: 14; }
    ResultsPictures:focus { background: $boost; }
    ResultsPictures #results-history { width: 2fr; }
    ResultsPictures #results-case-bars { width: 1fr; }
    """

    def compose(self) -> ComposeResult:
        yield PlotView(id="results-history", empty="no timed iteration yet")
        yield PlotView(id="results-case-bars")

    def show(self, loaded: LoadedResults, floor_ms: float | None = None) -> None:
        r = loaded.results
        series = history_series(r.branches) if r else []
        self.query_one("#results-history", PlotView).set_draw(
            history_draw(series, r.reference_ms if r else None, floor_ms), empty="no timed iteration yet"
        )
        cases = r.best.cases if r and r.best and r.cases else []
        bars = self.query_one("#results-case-bars", PlotView)
        bars.display = bool(cases)
        bars.set_draw(case_bars_draw(cases), empty="no case has a speedup yet")
        self.display = bool(series) or bool(cases)
