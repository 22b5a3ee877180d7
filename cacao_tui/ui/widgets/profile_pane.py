"""The Profile tab: NCU metrics with units, the change against the previous iteration, and the
roofline class."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from cacao_tui.store.state import ProfileOutcome
from cacao_tui.ui.formatting import fmt_change, fmt_config, fmt_ms, fmt_value
from cacao_tui.ui.plots.plot_view import PlotView
from cacao_tui.ui.plots.roofline import roofline_draw, roofline_of
from cacao_tui.ui.widgets.table_sync import KeyTable
from cacao_tui.ui.widgets.text_line import TextLine
from ktt.protocol import FloorReport, KernelProfile, ProfileReport

COLUMNS = (("section", "section"), ("metric", "metric"), ("value", "value"), ("change", "Δ prev"))
ROOFLINE_STYLES = {"memory-bound": "cyan", "compute-bound": "magenta", "latency-bound": "yellow"}


def _change_cell(text: str) -> Text:
    if text.startswith("+"):
        return Text(text, style="yellow")
    if text.startswith("-"):
        return Text(text, style="cyan")
    return Text(text, style="dim")


def metric_rows(report: ProfileReport, previous: ProfileReport | None) -> dict[str, tuple[object, ...]]:
    before: dict[tuple[str, str], KernelProfile] = {}
    if previous is not None:
        for k in previous.kernels:
            before[(k.kernel, str(k.launch_index))] = k
    rows: dict[str, tuple[object, ...]] = {}
    several = len(report.kernels) > 1
    for k in report.kernels:
        prev = before.get((k.kernel, str(k.launch_index)))
        if prev is None and previous is not None and len(previous.kernels) == 1 and not several:
            prev = previous.kernels[0]  # a renamed single kernel still compares
        old = {m.name: m.value for m in prev.metrics} if prev else {}
        for m in k.metrics:
            label = f"{k.launch_index}·{m.label}" if several else m.label
            rows[f"{k.launch_index}:{m.name}"] = (
                m.section.replace("_", " "),
                label,
                fmt_value(m.value, m.unit),
                _change_cell(fmt_change(m.value, old.get(m.name))),
            )
    return rows


class ProfilePane(Vertical):
    DEFAULT_CSS = "ProfilePane #profile-roofline-plot { height: 14; min-height: 8; }"

    def compose(self) -> ComposeResult:
        yield TextLine("Profile", id="profile-header", classes="pane-header")
        yield Static("", id="profile-roofline")
        yield PlotView(id="profile-roofline-plot")
        yield KeyTable(COLUMNS, id="profile-metrics")

    def show(
        self,
        where: str,
        report: ProfileReport | None,
        previous: ProfileReport | None,
        prev_label: str | None,
        outcome: ProfileOutcome | None,
        floor: FloorReport | None = None,
    ) -> None:
        """``floor``: the iteration's tune summary figures, the roofs' fallback (plots/roofline.py)."""
        compared = prev_label and previous is not None and report is not None and report.ok
        header = f"Profile · {where}" + (f" · Δ vs {prev_label}" if compared else "")
        self.query_one("#profile-header", TextLine).update(header)
        line = Text()
        table = self.query_one("#profile-metrics", KeyTable)
        if report is None or not report.ok:
            reason = (report.error if report else None) or (outcome.message if outcome else None)
            line.append("No NCU profile" + (f": {reason}" if reason else " for this selection yet."), style="dim")
            self.query_one("#profile-roofline", Static).update(line)
            self._show_roofline(None, floor)
            table.sync({})
            return
        for i, k in enumerate(report.kernels):
            line.append("\n" if i else "")
            line.append(k.kernel, style="bold")
            line.append("  ")
            line.append(k.roofline, style=f"bold {ROOFLINE_STYLES.get(k.roofline, '')}")
            if k.duration_ms is not None:
                line.append(f"  {fmt_ms(k.duration_ms)}")
        if report.config:
            line.append(f"\nconfig {fmt_config(report.config)}", style="dim")
        self._show_roofline(report, floor, line)
        self.query_one("#profile-roofline", Static).update(line)
        table.sync(metric_rows(report, previous))

    def _show_roofline(self, report: ProfileReport | None, floor: FloorReport | None, line: Text | None = None) -> None:
        """The first kernel's point on the roofline, with where the roofs come from."""
        plot = self.query_one("#profile-roofline-plot", PlotView)
        roof = roofline_of(report.kernels[0], floor) if report is not None and report.kernels else None
        draw = roofline_draw(roof) if roof is not None else None
        plot.display = draw is not None
        plot.set_draw(draw)
        if roof is not None and line is not None:
            line.append(f"\n{roof.summary()}", style="")
            if draw is not None:
                line.append(f"\n{roof.sources()}", style="dim")
