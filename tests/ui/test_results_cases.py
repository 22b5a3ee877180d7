"""The results view of a problem with cases: the best kernel's per-case table."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from ui_helpers import settle

from cacao_tui.store.atomic import write_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import BestResult, BranchSummary, CaseOutcome, FinalResults
from cacao_tui.ui.app import ResultsApp


def _text(widget: object) -> str:
    console = Console(width=200, record=True, color_system=None)
    console.print(widget.content)  # type: ignore[attr-defined]
    return console.export_text()


def _write(layout: RunLayout, cases: list[str]) -> None:
    outcomes = [
        CaseOutcome(name="big", status="ok", time_ms=0.5, reference_ms=10.0, reference_source="seeded",
                    speedup=20.0, config={"TILE": 32}, budget_s=120, evaluated=40, valid=31),
        CaseOutcome(name="small", status="ok", time_ms=0.05, reference_ms=0.2, reference_source="measured",
                    speedup=4.0, config={"TILE": 8}, budget_s=30, evaluated=12, valid=12),
    ]  # fmt: skip
    best = BestResult(branch="a", iteration=1, time_ms=0.5, speedup=20.0, score=8.94, kernel_path="k", cases=outcomes)
    summary = BranchSummary(name="a", title="t", status="done", iterations=1, best_ms=0.5, best_iteration=1)
    write_model(layout.final_results, FinalResults(problem_name="p", cases=cases, best=best, branches=[summary]))


async def test_the_per_case_table_is_shown_for_a_problem_with_cases(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path / "p")
    _write(layout, ["big", "small"])
    app = ResultsApp(layout)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot)
        text = _text(app.screen.query_one("#results-cases"))
    rows = [line.split() for line in text.splitlines() if line.strip()]
    assert rows[0] == ["case", "status", "best", "reference", "speedup", "budget", "valid", "config"]
    assert rows[1][:8] == ["big", "ok", "0.500", "ms", "10.0", "ms", "(seeded)", "×20"]
    assert rows[2][0] == "small" and "(measured)" in rows[2] and rows[2][-1] == "TILE=8"


async def test_no_case_table_without_cases(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path / "p")
    _write(layout, [])
    app = ResultsApp(layout)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot)
        assert not app.screen.query("#results-cases")


async def test_a_case_with_no_baseline_says_so(tmp_path: Path) -> None:
    """A null in reference_time.json: "no baseline" in the case's reference cell and in the score line."""
    layout = RunLayout(tmp_path / "p")
    outcomes = [
        CaseOutcome(name="big", status="ok", time_ms=0.5, reference_ms=10.0, reference_source="seeded",
                    speedup=20.0, evaluated=4, valid=4),
        CaseOutcome(name="small", status="ok", time_ms=0.05, reference_source="no baseline", evaluated=4, valid=4),
    ]  # fmt: skip
    best = BestResult(branch="a", iteration=1, time_ms=0.5, speedup=20.0, kernel_path="k", cases=outcomes)
    summary = BranchSummary(name="a", title="t", status="done", iterations=1, best_ms=0.5, best_iteration=1)
    final = FinalResults(problem_name="p", cases=["big", "small"], best=best, branches=[summary])
    write_model(layout.final_results, final)
    app = ResultsApp(layout)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot)
        table = _text(app.screen.query_one("#results-cases"))
        header = _text(app.screen.query_one("#results-header"))
    small = next(line.split() for line in table.splitlines() if line.strip().startswith("small"))
    assert small[4:6] == ["no", "baseline"]
    assert "no baseline for small (null in reference_time.json)" in " ".join(header.split())
