"""A sparkline of the best tuned time of each iteration of the selected branch.

One run of cells per iteration, eight heights from the branch's fastest to its slowest time
(``spark_text``): 1.29 and 1.21 ms read as different heights, where a bar scaled from zero drew
them alike. Lower is better; the label gives first → last and the minimum."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical

from cacao_tui.ui.formatting import fmt_ms, spark_text
from cacao_tui.ui.run_view import BranchView
from cacao_tui.ui.widgets.text_line import TextLine


def spark_cells(data: list[float], width: int) -> Text:
    """The sparkline in ``width`` cells: each iteration as wide as the room allows (1 to 3 cells)."""
    if not data:
        return Text("")
    shown = data[-max(1, width) :]
    each = max(1, min(3, width // len(shown)))
    marks = spark_text(shown)
    text = Text(no_wrap=True)
    low = min(shown)
    for mark, value in zip(marks, shown, strict=True):
        text.append(mark * each, style="green" if value == low else "")
    return text


class BestSparkline(Vertical):
    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.data: list[float] = []

    def compose(self) -> ComposeResult:
        yield TextLine("best per iteration", id="spark-label")
        yield TextLine("", id="spark")

    def show(self, branch: BranchView | None) -> None:
        self.data = branch.best_per_iteration() if branch else []
        self._draw()
        if branch is None:
            label = "best per iteration: select a branch"
        elif not self.data:
            label = f"{branch.name}: no timed iteration yet"
        else:
            data = self.data
            label = f"{branch.name}: {fmt_ms(data[0])} → {fmt_ms(data[-1])} (min {fmt_ms(min(data))})"
        self.query_one("#spark-label", TextLine).update(label)

    def on_resize(self) -> None:
        self._draw()

    def _draw(self) -> None:
        self.query_one("#spark", TextLine).update(spark_cells(self.data, max(1, self.content_size.width)))
