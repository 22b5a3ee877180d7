"""The Tuning tab: progress (live from events), counts, top configurations, failures by status."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import HorizontalScroll, Vertical
from textual.widgets import ProgressBar

from cacao_tui.engine.events import TuningFinished, TuningProgress
from cacao_tui.ui.disk import TuningView
from cacao_tui.ui.formatting import NONE, fmt_config, fmt_ms, fmt_speedup, safe_text
from cacao_tui.ui.widgets.case_table import CaseRow, CaseTable
from cacao_tui.ui.widgets.table_sync import KeyTable
from cacao_tui.ui.widgets.text_line import TextLine

COLUMNS = (("rank", "#"), ("time", "time"), ("speedup", "speedup"), ("config", "configuration"))
FAIL_STYLES = {"compile_failed": "red", "runtime_error": "red", "validation_failed": "red", "suspect": "yellow"}


def by_status_text(by_status: dict[str, int]) -> Text:
    text = Text("failures: ", style="bold")
    failures = {k: v for k, v in sorted(by_status.items()) if k != "ok" and v}
    if not failures:
        text.append("none", style="dim")
    for i, (status, count) in enumerate(failures.items()):
        text.append(" · " if i else "")
        text.append(f"{status} {count}", style=FAIL_STYLES.get(status, "yellow"))
    return text


def _dry(message: str | None) -> bool:
    return (message or "").startswith("dry run")  # nodes/run.py: a dry run's outcome says so first


class TuningPane(Vertical):
    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._reference_ms: float | None = None

    def compose(self) -> ComposeResult:
        yield TextLine("Tuning", id="tuning-header", classes="pane-header")
        yield TextLine("", id="tuning-counts")
        yield ProgressBar(total=1, show_eta=False, id="tuning-progress")  # never indeterminate: it animates
        yield TextLine("", id="tuning-failures")
        with HorizontalScroll(id="tuning-cases-scroll"):  # wider than the pane: ← → scroll it
            yield CaseTable(id="tuning-cases")
        yield KeyTable(COLUMNS, id="tuning-top")

    def _counts(
        self, phase: str, evaluated: int, valid: int, space: int, best_ms: float | None, extra: str = ""
    ) -> None:
        text = Text()
        text.append(f"{phase} ", style="cyan")
        text.append(f"evaluated {evaluated:,}" + (f" / {space:,}" if space else ""))
        text.append(f" · valid {valid:,}")
        text.append(f" · best {fmt_ms(best_ms)}", style="green" if best_ms is not None else "dim")
        if extra:
            text.append(f" · {extra}")
        self.query_one("#tuning-counts", TextLine).update(text)

    def show_files(
        self, where: str, tuning: TuningView | None, ran: bool | None, message: str | None, ended: str | None = None
    ) -> None:
        """What the iteration's tune/ files say (after tuning, or while results.jsonl grows).
        ``ended``: the iteration was cut short (interrupted, killed): it waits for nothing."""
        header = f"Tuning · {where}"
        if ran is False:
            header += " · not tuned" + (" (dry run)" if _dry(message) else f" ({message})" if message else "")
        self.query_one("#tuning-header", TextLine).update(header)
        bar = self.query_one("#tuning-progress", ProgressBar)
        bar.display = ended is None or (tuning is not None and tuning.summary is not None)
        if ran is False and (tuning is None or tuning.summary is None):  # decided: it waits for nothing
            self._not_tuned(message)
            return
        if tuning is None or (tuning.evaluated == 0 and tuning.summary is None):
            if ended is not None:
                counts = Text(f"{ended} ", style="yellow")
                counts.append("not tuned: the iteration ended before its tuning", style="dim")
                self.query_one("#tuning-counts", TextLine).update(counts)
            else:
                self._counts("waiting", 0, 0, 0, None)
            bar.update(total=1, progress=0)
            self.query_one("#tuning-failures", TextLine).update(by_status_text({}))
            self.query_one("#tuning-top", KeyTable).sync({})
            return
        summary = tuning.summary
        space = summary.space_size if summary else 0
        self._reference_ms = summary.reference_ms if summary else self._reference_ms
        best = tuning.top[0].time_ms if tuning.top else None
        extra = ""
        if summary is not None:
            extra = f"{summary.wall_s:.0f} s · speedup {fmt_speedup(summary.speedup)}"
            bar.update(total=max(1, summary.evaluated), progress=summary.evaluated)
        if tuning.top_case is not None:  # the top table ranks one case; the per-case table has them all
            extra += (" · " if extra else "") + f"top: case {safe_text(tuning.top_case)}"
        self._counts("done" if summary else ended or "search", tuning.evaluated, tuning.valid, space, best, extra)
        self.query_one("#tuning-failures", TextLine).update(by_status_text(tuning.by_status))
        self._show_top(tuning)

    def show_cases(self, cases: Sequence[CaseRow], score: float | None, title: str, extra: str = "") -> None:
        """The per-case table of a problem with several cases (hidden otherwise)."""
        self.query_one("#tuning-cases", CaseTable).show_cases(cases, score, title, extra)

    def _show_top(self, tuning: TuningView) -> None:
        rows: dict[str, tuple[object, ...]] = {}
        for rank, result in enumerate(tuning.top, 1):
            speedup = self._reference_ms / result.time_ms if self._reference_ms and result.time_ms else None
            rows[str(rank)] = (str(rank), fmt_ms(result.time_ms), fmt_speedup(speedup), fmt_config(result.config))
        self.query_one("#tuning-top", KeyTable).sync(rows)

    def show_progress(self, e: TuningProgress) -> None:
        """Live: one event per throttled progress line of the tuner."""
        bar = self.query_one("#tuning-progress", ProgressBar)
        p = e.progress
        if p.budget_s:
            bar.update(total=p.budget_s, progress=min(p.elapsed_s, p.budget_s))
        elif p.space_size:
            bar.update(total=p.space_size, progress=p.evaluated)
        budget = f"{p.elapsed_s:.0f}/{p.budget_s:.0f} s" if p.budget_s else f"{p.elapsed_s:.0f} s"
        self._counts(e.phase, p.evaluated, p.valid, p.space_size, p.best_ms, budget)
        self.query_one("#tuning-failures", TextLine).update(by_status_text(p.by_status))
        if p.best_config is not None and p.best_ms is not None:
            table = self.query_one("#tuning-top", KeyTable)
            if table.row_count == 0:
                table.sync({"1": ("1", fmt_ms(p.best_ms), NONE, fmt_config(p.best_config))})

    def _not_tuned(self, message: str | None) -> None:
        """A step that tuned nothing (a dry run's compile check, a tuning that could not start): said
        so, with no counts and no progress bar."""
        counts = Text("not tuned" + (" (dry run)" if _dry(message) else ""), style="yellow")
        if message:
            counts.append(f": {safe_text(message)}", style="dim")
        self.query_one("#tuning-counts", TextLine).update(counts)
        self.query_one("#tuning-progress", ProgressBar).display = False
        self.query_one("#tuning-failures", TextLine).update(by_status_text({}))
        self.query_one("#tuning-top", KeyTable).sync({})

    def show_finished(self, e: TuningFinished) -> None:
        bar = self.query_one("#tuning-progress", ProgressBar)
        r = e.outcome
        if not r.ran:
            self._not_tuned(r.message)
            return
        bar.update(total=max(1, r.evaluated), progress=r.evaluated)
        extra = f"speedup {fmt_speedup(r.speedup)}" + (f" · {r.message}" if r.message else "")
        self._counts("done" if r.ran else "not tuned", r.evaluated, r.valid, 0, r.best_ms, extra)
        self.query_one("#tuning-failures", TextLine).update(by_status_text(r.by_status))
