"""The per-case table in the app: the Tuning tab of an iteration (and the branch's best), and the
results view. Each case shows its name, status, best time, reference time with its source, and
speedup; the score line says it is the geometric mean, or why there is none."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from textual.widget import Widget
from textual.widgets import DataTable
from ui_helpers import Run, select, settle, start

from cacao_tui.store.atomic import read_model, write_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import BestResult, BranchManifest, BranchSummary, CaseOutcome, FinalResults, IterState
from cacao_tui.ui.app import ResultsApp
from cacao_tui.ui.widgets.case_table import CaseTable
from ktt.protocol import ConfigResult

OK_CASES = [
    CaseOutcome(name="s513", status="ok", time_ms=0.4263, reference_ms=1.786, reference_source="seeded",
                speedup=4.19, config={"BX": 32, "BY": 4}, budget_s=8, evaluated=24, valid=24),
    CaseOutcome(name="s227", status="ok", time_ms=0.06, reference_ms=0.1415, reference_source="measured",
                speedup=2.36, config={"BX": 16, "BY": 8}, budget_s=8, evaluated=20, valid=19),
    CaseOutcome(name="s1024x33", status="ok", time_ms=0.09, reference_ms=0.09613, reference_source="measured",
                speedup=1.07, config={"BX": 64, "BY": 2}, budget_s=8, evaluated=22, valid=22),
]  # fmt: skip
GEOMEAN = (4.19 * 2.36 * 1.07) ** (1 / 3)
FAILED_CASES = [
    OK_CASES[0],
    CaseOutcome(name="s227", status="no_valid", reference_ms=0.1415, reference_source="measured", budget_s=8,
                evaluated=20, valid=0, error="no configuration passed validation"),
    CaseOutcome(name="s1024x33", status="not_run", budget_s=8),
]  # fmt: skip


def text_of(widget: Widget) -> str:
    console = Console(width=200, record=True, color_system=None)
    console.print(widget.content)  # type: ignore[attr-defined]
    return console.export_text()


def rows_of(text: str) -> dict[str, list[str]]:
    """Table lines keyed by their first word."""
    return {line.split()[0]: line.split() for line in text.splitlines() if line.strip()}


def set_cases(layout: RunLayout, index: int, cases: list[CaseOutcome], score: float | None) -> None:
    """Give iteration ``index`` of the scripted 'tiled' branch a per-case tuning result."""
    path = layout.branch("tiled").iteration(index).state
    st = read_model(path, IterState)
    assert st.run is not None
    write_model(path, st.model_copy(update={"run": st.run.model_copy(update={"cases": cases, "score": score})}))


async def test_the_tuning_tab_shows_the_iterations_cases_and_the_geometric_mean(run: Run) -> None:
    set_cases(run.layout, 2, OK_CASES, GEOMEAN)
    async with run.app().run_test(size=(160, 50)) as pilot:
        app = await start(pilot, run)
        await select(pilot, "tiled", 2)
        await pilot.press("4")  # the Tuning tab
        await settle(pilot)
        table = app.main_screen.query_one("#tuning-cases", CaseTable)
        assert table.display
        text = text_of(table)
    first = text.splitlines()[0]
    assert first.startswith("per case · tiled/iter2 · score ×2.2: the geometric mean of the 3 cases' speedups")
    rows = rows_of(text)
    assert rows["case"] == ["case", "status", "best", "reference", "speedup", "budget", "valid", "config"]
    assert rows["s513"] == ["s513", "ok", "0.426", "ms", "1.79", "ms", "(seeded)", "×4.19", "8", "s", "24/24",
                            "BX=32", "BY=4"]  # fmt: skip
    assert rows["s227"][:8] == ["s227", "ok", "60.0", "µs", "0.141", "ms", "(measured)", "×2.36"]
    assert rows["s1024x33"][:8] == ["s1024x33", "ok", "90.0", "µs", "96.1", "µs", "(measured)", "×1.07"]
    assert "this iteration is the branch's best" in text  # the scripted manifest's best is iteration 2
    assert [line.split()[0] for line in text.splitlines() if line.strip()][2:5] == ["s513", "s227", "s1024x33"]


async def test_a_case_without_a_valid_result_leaves_no_score_and_says_which(run: Run) -> None:
    set_cases(run.layout, 1, FAILED_CASES, None)
    async with run.app().run_test(size=(160, 50)) as pilot:
        app = await start(pilot, run)
        await select(pilot, "tiled", 1)
        text = text_of(app.main_screen.query_one("#tuning-cases", CaseTable))
    first = text.splitlines()[0]
    assert "score —: none, no valid result for s227, s1024x33 (the geometric mean needs every case)" in first
    rows = rows_of(text)
    assert rows["s227"][:5] == ["s227", "no_valid", "—", "0.141", "ms"] and rows["s227"][6] == "—"
    assert rows["s1024x33"][:5] == ["s1024x33", "not_run", "—", "—", "—"]
    assert "branch best: iter2" in text  # the branch's best is another iteration


async def test_the_branch_selection_shows_its_best_kernels_cases(run: Run) -> None:
    """With the branch (not an iteration) selected and no per-case result in its latest iteration."""
    path = run.layout.branch("tiled").manifest
    m = read_model(path, BranchManifest)
    assert m.best is not None
    write_model(path, m.model_copy(update={"best": m.best.model_copy(update={"cases": OK_CASES, "score": GEOMEAN})}))
    async with run.app().run_test(size=(160, 50)) as pilot:
        app = await start(pilot, run)
        await select(pilot, "tiled")
        text = text_of(app.main_screen.query_one("#tuning-cases", CaseTable))
    assert text.splitlines()[0].startswith("per case · tiled/iter2 (branch best) · score ×2.2: the geometric mean")
    assert set(rows_of(text)) >= {"s513", "s227", "s1024x33"}


async def test_without_cases_there_is_no_case_table(run: Run) -> None:
    async with run.app().run_test(size=(160, 50)) as pilot:
        app = await start(pilot, run)
        await select(pilot, "tiled", 2)
        table = app.main_screen.query_one("#tuning-cases", CaseTable)
        assert not table.display and table.region.height == 0


async def test_the_top_configurations_rank_one_case(run: Run) -> None:
    """results.jsonl of a run with cases holds every case's rows: times of different shapes do not rank together."""
    it = run.layout.branch("tiled").iteration(2)
    rows = [
        ConfigResult(index=0, config={"TILE": 8}, status="ok", time_ms=1.5, shape="s513"),
        ConfigResult(index=1, config={"TILE": 16}, status="ok", time_ms=1.2, shape="s513"),
        ConfigResult(index=2, config={"TILE": 8}, status="ok", time_ms=0.05, shape="s227"),  # a smaller shape
        ConfigResult(index=3, config={"TILE": 16}, status="ok", time_ms=0.06, shape="s227"),
    ]
    it.tune_results.write_text("".join(r.model_dump_json() + "\n" for r in rows))
    set_cases(run.layout, 2, OK_CASES[:2], (4.19 * 2.36) ** 0.5)
    async with run.app().run_test(size=(160, 50)) as pilot:
        app = await start(pilot, run)
        await select(pilot, "tiled", 2)
        screen = app.main_screen
        top = screen.query_one("#tuning-top", DataTable)
        times = [str(top.get_row_at(i)[1]) for i in range(top.row_count)]
        counts = text_of(screen.query_one("#tuning-counts"))
    assert times == ["1.20 ms", "1.50 ms"]
    assert "top: case s513" in counts


def _final(layout: RunLayout, best: BestResult | None) -> None:
    summary = BranchSummary(name="a", title="t", status="done", iterations=1, best_ms=0.4263, best_iteration=1)
    write_model(
        layout.final_results, FinalResults(problem_name="p", cases=["s513", "s227", "s1024x33"], best=best,
                                           branches=[summary])
    )  # fmt: skip


async def test_the_results_view_says_the_score_is_the_geometric_mean(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path / "p")
    best = BestResult(branch="a", iteration=1, time_ms=0.4263, speedup=4.19, score=GEOMEAN, kernel_path="k",
                      cases=OK_CASES, superseded=True)  # fmt: skip
    _final(layout, best)
    app = ResultsApp(layout)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        header = text_of(app.screen.query_one("#results-header"))
        cases = text_of(app.screen.query_one("#results-cases"))
    assert "score ×2.2: the geometric mean of the 3 cases' speedups" in header
    assert "superseded by a revert, still the fastest measured" in header
    assert rows_of(cases)["s513"][4:7] == ["1.79", "ms", "(seeded)"]


async def test_the_results_view_without_a_scored_kernel(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path / "p")
    _final(layout, None)
    app = ResultsApp(layout)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        header = text_of(app.screen.query_one("#results-header"))
    assert "no kernel has a valid result on every case, so none has a score" in header


async def test_at_80x24_the_case_table_keeps_its_width_and_scrolls(run: Run) -> None:
    """Wider than the Tuning tab at 80 columns: its columns are not squeezed or cut; → shows the rest."""
    set_cases(run.layout, 2, OK_CASES, GEOMEAN)
    async with run.app().run_test(size=(80, 24)) as pilot:
        app = await start(pilot, run)
        await select(pilot, "tiled", 2)
        await pilot.press("4")
        await settle(pilot)
        table = app.main_screen.query_one("#tuning-cases", CaseTable)
        scroll = app.main_screen.query_one("#tuning-cases-scroll")
        assert table.size.width > scroll.size.width and scroll.max_scroll_x > 0
        assert "BX=32 BY=4" in text_of(table)  # the configuration column is there, whole
        scroll.focus()
        await pilot.press("right")
        await settle(pilot)
        assert scroll.scroll_x > 0
