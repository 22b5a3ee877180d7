"""The Profile tab: NCU metrics with units, the change against the previous iteration, and the
roofline class."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from cacao_tui.store.state import ProfileOutcome
from cacao_tui.ui.formatting import fmt_change, fmt_config, fmt_ms, fmt_value
from cacao_tui.ui.widgets.table_sync import KeyTable
from cacao_tui.ui.widgets.text_line import TextLine
from ktt.protocol import KernelProfile, ProfileReport

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
    def compose(self) -> ComposeResult:
        yield TextLine("Profile", id="profile-header", classes="pane-header")
        yield Static("", id="profile-roofline")
        yield KeyTable(COLUMNS, id="profile-metrics")

    def show(
        self,
        where: str,
        report: ProfileReport | None,
        previous: ProfileReport | None,
        prev_label: str | None,
        outcome: ProfileOutcome | None,
    ) -> None:
        compared = prev_label and previous is not None and report is not None and report.ok
        header = f"Profile · {where}" + (f" · Δ vs {prev_label}" if compared else "")
        self.query_one("#profile-header", TextLine).update(header)
        line = Text()
        table = self.query_one("#profile-metrics", KeyTable)
        if report is None or not report.ok:
            reason = (report.error if report else None) or (outcome.message if outcome else None)
            line.append("No NCU profile" + (f": {reason}" if reason else " for this selection yet."), style="dim")
            self.query_one("#profile-roofline", Static).update(line)
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
        self.query_one("#profile-roofline", Static).update(line)
        table.sync(metric_rows(report, previous))
