"""A replay's tokens and cost in the app are marked illustrative wherever they are shown (issue 32
item 13): the status bar, the results view, the home screen's row and panel, an LLM call's head."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console
from textual.widgets import Static
from ui_helpers import Run, start, until

from cacao_tui.engine import events as ev
from cacao_tui.store.atomic import write_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import BestResult, FinalResults
from cacao_tui.ui.app import ResultsApp
from cacao_tui.ui.disk import LLMCallView
from cacao_tui.ui.home.home_app import HomeApp
from cacao_tui.ui.widgets.llm_pane import call_detail
from cacao_tui.ui.widgets.status_bar import StatusBar
from tests.runs.run_files import copy_problem, finished_run_events, started, write_log


def _plain(renderable: object) -> str:
    console = Console(width=300, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


async def test_the_status_bar_marks_a_replays_cost(run: Run) -> None:
    async with run.app().run_test(size=(80, 24)) as pilot:
        app = await start(pilot, run)
        bar = app.main_screen.query_one(StatusBar).bar_text(80).plain
        assert "$0.42 illustrative" in bar, bar  # the scripted run is a replay
        app.view.info = app.view.info.model_copy(update={"provider": "anthropic"})
        assert "illustrative" not in app.main_screen.query_one(StatusBar).bar_text(200).plain


def test_an_llm_calls_head_marks_a_replays_cost() -> None:
    call = LLMCallView(path=Path("x.json"), node="author", index=0, input_tokens=9000, cost_usd=0.03, provider="replay")
    assert "$0.03 (illustrative)" in _plain(call_detail(call))
    call.provider = "openai"
    assert "illustrative" not in _plain(call_detail(call))


async def test_the_results_view_marks_a_replays_cost(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    best = BestResult(branch="b1-a", iteration=1, time_ms=0.5, speedup=20.0, kernel_path="k")
    final = FinalResults(problem_name="mmul", best=best, tokens={"input": 350_000, "output": 11_000}, cost_usd=0.93,
                         illustrative_usage=True)  # fmt: skip
    write_model(RunLayout(problem).final_results, final)
    app = ResultsApp(RunLayout(problem))
    async with app.run_test(size=(80, 24)) as pilot:
        header = app.screen.query_one("#results-header", Static)
        await until(pilot, lambda: "cost" in _plain(header.content), "the header")
        assert "cost $0.93 illustrative" in _plain(header.content).replace("\n", " ")


async def test_the_home_screen_marks_a_replays_cost(tmp_path: Path) -> None:
    folder = tmp_path / "problems"
    mmul = copy_problem(folder, "mmul")
    events = finished_run_events()
    events.insert(1, ev.LLMCallEvent.model_validate({
        "ts": started().ts + 1, "call": {"node": "analyze", "index": 0, "provider": "replay", "model": "replay",
                                         "usage": {"input_tokens": 3800, "output_tokens": 300, "cost_usd": 0.02}},
        "run": {"input_tokens": 3800, "output_tokens": 300, "cost_usd": 0.02}}))  # fmt: skip
    write_log(mmul, events)
    app = HomeApp(folder)
    async with app.run_test(size=(200, 60)) as pilot:
        await until(pilot, lambda: app.home.scans > 0, "the list")
        row = dict(zip(app.home.table.column_keys, app.home.table.get_row("mmul"), strict=True))
        assert str(row["cost"]) == "$0.02*"
        header = _plain(app.home.query_one("#home-header", Static).content)
        assert "* cost of a replay: illustrative" in header, header
        detail = _plain(app.home.query_one("#home-detail", Static).content)
        assert "4.1k tokens, $0.02 (illustrative)" in detail, detail
