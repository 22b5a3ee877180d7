"""Hints that match what the key does (issue 32 item 9): an invalid problem offers e, not r; p and
x on a branch that has ended say so instead of "paused" or "its running step"; the results view of
--best says Esc quits; the run's header does not count the branches twice."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console
from textual.widgets import Footer, Static
from textual.widgets._footer import FooterKey
from ui_helpers import Run, select, start, until

from cacao_tui.store.atomic import write_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import BestResult, FinalResults
from cacao_tui.ui.app import ResultsApp
from cacao_tui.ui.home.home_app import HomeApp
from cacao_tui.ui.screens.dialogs import ConfirmScreen
from cacao_tui.ui.screens.results import ResultsScreen
from cacao_tui.ui.widgets.details import selection_header
from tests.runs.run_files import copy_problem


def _plain(renderable: object) -> str:
    console = Console(width=300, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def _notices(app: object) -> list[str]:
    return [n.message for n in app._notifications]  # type: ignore[attr-defined]


async def test_an_invalid_problem_offers_e_not_r(tmp_path: Path) -> None:
    broken = copy_problem(tmp_path, "broken")
    (broken / "problem.yaml").write_text((broken / "problem.yaml").read_text() + "\nbroken: [unclosed\n")
    app = HomeApp(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.home.scans > 0, "the list")
        detail = _plain(app.home.query_one("#home-detail", Static).content)
        assert "e edits it" in detail and "r runs it" not in detail, detail
        await pilot.press("r")
        await until(pilot, lambda: any("e edits it" in n for n in _notices(app)), "r's answer")
        await pilot.press("enter")
        await until(pilot, lambda: any("has not been run yet: e edits it" in n for n in _notices(app)), "Enter's")


async def test_p_and_x_on_a_branch_that_has_ended_say_so(run: Run) -> None:
    async with run.app().run_test(size=(120, 40)) as pilot:
        app = await start(pilot, run)
        await select(pilot, "vectorized")  # failed
        await pilot.press("p")
        await until(pilot, lambda: any("vectorized has ended (failed): nothing to pause" in n for n in _notices(app)))
        assert not any("paused" in n for n in _notices(app))
        await pilot.press("x")
        await until(pilot, lambda: any("nothing to kill" in n for n in _notices(app)))
        assert not isinstance(app.screen, ConfirmScreen)
        assert not [c for c in run.engine.calls if c[0] in ("toggle_pause", "kill_branch")]
        await select(pilot, "tiled")  # running: x asks, naming its running step
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "running step is cancelled" in _plain(app.screen.query_one(".dialog-text", Static).content)


async def test_the_runs_header_counts_the_branches_once(run: Run) -> None:
    async with run.app().run_test(size=(80, 24)) as pilot:
        app = await start(pilot, run)
        header = selection_header(app.view, app.main_screen.selection).plain.splitlines()[0]
        assert header.startswith("mmul · dispatched: 2 strategies · 2 active"), header
        assert "branch(es)" not in header


async def test_the_results_view_of_best_says_esc_quits(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    best = BestResult(branch="b1-a", iteration=1, time_ms=0.5, speedup=20.0, kernel_path="k")
    write_model(RunLayout(problem).final_results, FinalResults(problem_name="mmul", best=best))
    for size in ((80, 24), (200, 60)):
        async with ResultsApp(RunLayout(problem)).run_test(size=size) as pilot:
            app = pilot.app
            await until(pilot, lambda: bool(pilot.app.screen.query(FooterKey)), "the footer")
            keys = {k.key_display: k.description for k in app.screen.query_one(Footer).query(FooterKey)}
            assert keys.get("esc") == "quit", keys
            await pilot.press("escape")
            await until(pilot, lambda: not pilot.app.is_running, "Esc quits")
    # Opened from the app (b), Esc goes back: its footer says so.
    async with Run(tmp_path / "run").app().run_test(size=(80, 24)) as pilot:
        await pilot.press("b")
        await until(pilot, lambda: isinstance(pilot.app.screen, ResultsScreen))
        await until(pilot, lambda: bool(pilot.app.screen.query(FooterKey)), "the footer")
        keys = {k.key_display: k.description for k in pilot.app.screen.query_one(Footer).query(FooterKey)}
        assert keys.get("esc") == "back", keys


async def test_the_palette_has_no_generic_keys_entry(tmp_path: Path, run: Run) -> None:
    """Item 14: Textual's "Keys" (its help panel) is not in any of the apps' palettes; `?` lists the keys."""
    from cacao_tui.ui.editor import EditorApp

    problem = copy_problem(tmp_path / "p")
    best = BestResult(branch="b1-a", iteration=1, time_ms=0.5, speedup=20.0, kernel_path="k")
    write_model(RunLayout(problem).final_results, FinalResults(problem_name="mmul", best=best))
    apps = (HomeApp(tmp_path / "p"), run.app(), ResultsApp(RunLayout(problem)), EditorApp(tmp_path / "n", new=True))
    for app in apps:
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            titles = [c.title for c in app.get_system_commands(app.screen)]
            assert titles and "Keys" not in titles, (type(app).__name__, titles)
