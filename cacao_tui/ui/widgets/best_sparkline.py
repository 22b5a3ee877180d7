"""A sparkline of the best tuned time of each iteration of the selected branch."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Sparkline

from cacao_tui.ui.formatting import fmt_ms
from cacao_tui.ui.run_view import BranchView
from cacao_tui.ui.widgets.text_line import TextLine


class BestSparkline(Vertical):
    def compose(self) -> ComposeResult:
        yield TextLine("best per iteration", id="spark-label")
        yield Sparkline([], id="spark")

    def show(self, branch: BranchView | None) -> None:
        data = branch.best_per_iteration() if branch else []
        spark = self.query_one("#spark", Sparkline)
        if list(spark.data or []) != data:
            spark.data = data
        if branch is None:
            label = "best per iteration: select a branch"
        elif not data:
            label = f"{branch.name}: no timed iteration yet"
        else:
            label = f"{branch.name}: {fmt_ms(data[0])} → {fmt_ms(data[-1])} (min {fmt_ms(min(data))})"
        self.query_one("#spark-label", TextLine).update(label)
