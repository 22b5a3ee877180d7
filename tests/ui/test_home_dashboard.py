"""The home screen as a dashboard (issue 24 item 9, Deliver 5): a / filter, sorting, G / End, the
wide columns at 200 columns (history, tokens, cost, GPU time) spread over the screen, and the
best's figure labelled the same way here as in the run view (a score with cases, else the speedup)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from test_home import _plain, _ready
from ui_helpers import settle, until_finished

from cacao_tui.engine import events as ev
from cacao_tui.store.atomic import write_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import BestResult, FinalResults
from cacao_tui.ui.home.attach import AttachApp
from cacao_tui.ui.home.home_app import HomeApp
from cacao_tui.ui.widgets.status_bar import StatusBar
from tests.runs.run_files import T0, copy_problem, started, write_log

REPO = Path(__file__).resolve().parents[2]


def _folder(root: Path) -> Path:
    """mmul: two improvements, tokens and cost, a timed tuning; stencil (cases): a score of 6.77
    whose primary speedup is 8.53; transpose: never run."""
    folder = root / "problems"
    mmul = copy_problem(folder, "mmul")
    call = ev.LLMCallEvent.model_validate({"ts": T0 + 2, "call": {"node": "plan", "index": 0, "provider": "x",
                                           "model": "x"}, "run": {"input_tokens": 12000, "output_tokens": 3400,
                                                                  "cost_usd": 0.42}})  # fmt: skip
    write_log(mmul, [
        started(ts=T0, dry_run=False), call,
        ev.NewBest(ts=T0 + 5, branch="b1", iteration=1, time_ms=1.29, speedup=3.0, run_best=True),
        ev.NewBest(ts=T0 + 9, branch="b1", iteration=2, time_ms=1.21, speedup=3.2, run_best=True),
        ev.RunFinished(ts=T0 + 10, status="ok", best_ms=1.21, speedup=3.2, best_branch="b1"),
    ], mtime=T0 + 10)  # fmt: skip
    tune = RunLayout(mmul).output / "branches" / "b1" / "iter1" / "tune"
    tune.mkdir(parents=True)
    (tune / "summary.json").write_text(json.dumps({"wall_s": 150.0}))
    stencil = copy_problem(folder, "stencil", REPO / "problems" / "stencil")
    write_log(stencil, [
        started(ts=T0, problem="stencil", dry_run=False),
        ev.NewBest(ts=T0 + 5, branch="b1", iteration=1, time_ms=0.2, speedup=8.53, score=6.77, run_best=True),
        ev.RunFinished(ts=T0 + 10, status="ok", best_ms=0.2, speedup=8.53, score=6.77, best_branch="b1"),
    ], mtime=T0 + 11)  # fmt: skip
    best = BestResult(branch="b1", iteration=1, time_ms=0.2, speedup=8.53, score=6.77, kernel_path="k")
    write_model(RunLayout(stencil).final_results,
                FinalResults(problem_name="stencil", best=best, cases=["small", "wide"], speedup=6.77))  # fmt: skip
    copy_problem(folder, "transpose", REPO / "problems" / "transpose")
    return folder


def _names(home) -> list[str]:
    return home.table.order()


def test_wide_columns_filter_sort_and_end(tmp_path: Path) -> None:
    folder = _folder(tmp_path)

    async def go() -> None:
        app = HomeApp(folder)
        async with app.run_test(size=(200, 60)) as pilot:
            home = await _ready(pilot, app)
            await settle(pilot)
            labels = [str(c.label) for c in home.table.columns.values()]
            assert labels[5:9] == ["best time, each improvement", "tokens", "cost", "GPU time"]
            assert home.table.virtual_size.width >= 150  # the table uses the screen, not 55 columns
            row = dict(zip(home.table.column_keys, home.table.get_row("mmul"), strict=True))
            assert str(row["history"]).startswith("█▁") and "1.21 ms" in str(row["history"])  # 1.29 then 1.21
            assert (str(row["tokens"]), str(row["cost"]), str(row["gpu"])) == ("15.4k", "$0.42*", "2.5 min")  # a replay
            stencil = dict(zip(home.table.column_keys, home.table.get_row("stencil"), strict=True))
            assert str(stencil["best"]) == "score ×6.77"
            # / filters by name; Esc clears it.
            await pilot.press("slash", *"sten")
            await settle(pilot)
            assert _names(home) == ["stencil"] and "filter “sten”: 1 shown" in _plain(home.query_one("#home-header"))
            await pilot.press("enter")  # keeps the filter, back in the table
            await pilot.press("escape")
            await settle(pilot)
            assert _names(home) == ["mmul", "stencil", "transpose"]
            # s sorts: by last run, then by best (the best first), then by when (the newest first).
            await pilot.press("s")
            await settle(pilot)
            await pilot.press("s")
            await settle(pilot)
            assert home.sort_by == "best" and _names(home) == ["stencil", "mmul", "transpose"]
            await pilot.press("s")
            await settle(pilot)
            assert home.sort_by == "when" and _names(home)[:2] == ["stencil", "mmul"]
            await pilot.press("G")
            await settle(pilot)
            assert home.current().key == _names(home)[-1]
            await pilot.press("home")
            await settle(pilot)
            assert home.current().key == _names(home)[0]

    asyncio.run(go())


def test_at_80_columns_the_compact_table(tmp_path: Path) -> None:
    folder = _folder(tmp_path)

    async def go() -> None:
        app = HomeApp(folder)
        async with app.run_test(size=(80, 24)) as pilot:
            home = await _ready(pilot, app)
            assert [str(c.label) for c in home.table.columns.values()] == [
                "problem", "ref", "cases", "last run", "best", "when"]  # fmt: skip
            assert str(dict(zip(home.table.column_keys, home.table.get_row("stencil"), strict=True))["best"]) == (
                "score ×6.77"
            )

    asyncio.run(go())


def test_the_run_view_labels_the_best_as_the_home_does(tmp_path: Path) -> None:
    folder = _folder(tmp_path)

    async def go() -> None:
        app = AttachApp(folder / "stencil", poll_interval=0.05)
        async with app.run_test(size=(160, 40)) as pilot:
            await until_finished(pilot, app)
            bar = app.main_screen.query_one(StatusBar).bar_text(160).plain
            assert "best 0.200 ms score ×6.77" in bar and "×8.53" not in bar

    asyncio.run(go())
