"""Item 10 of issue 24: one notification per end of a run, paths that are cut at a separator
instead of split mid-name, and dialogs in the app's words rather than the command line's."""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual.widgets import Static
from ui_helpers import Run, settle, start, until_finished

from cacao_tui.runs.catalog import scan_problems
from cacao_tui.ui.formatting import fit_path
from cacao_tui.ui.home.attach import AttachApp
from cacao_tui.ui.home.rows import describe
from cacao_tui.ui.screens.dialogs import QuitScreen
from tests.runs.run_files import copy_problem, finished_run_events, write_log


def test_a_finished_run_is_announced_once(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path, "mmul")
    write_log(problem, finished_run_events())

    async def go() -> None:
        app = AttachApp(problem, poll_interval=0.05)
        async with app.run_test(size=(80, 24)) as pilot:
            await until_finished(pilot, app)
            finished = app.view.finished
            assert finished is not None
            app.bus.emit(finished)  # the same end again (a view fed twice): still one notice
            await settle(pilot)
            notices = [n.message for n in app._notifications if n.message.startswith("Run finished")]
            assert notices == ["Run finished (ok): best 1.20 ms ×3.25 (b1-tiling). b: results, q: quit."]

    asyncio.run(go())


def test_paths_are_cut_at_a_separator_from_the_left() -> None:
    path = "/home/someone/work/kernels/problems/matrix_multiply_fp32"
    assert fit_path(path, 80) == path
    cut = fit_path(path, 32)
    assert cut == "…/problems/matrix_multiply_fp32" and len(cut) <= 32
    assert fit_path("/a/" + "x" * 40, 20) == "…" + "x" * 19  # one name longer than the room: its end


def test_the_home_panel_keeps_the_path_on_the_names_line(tmp_path: Path) -> None:
    deep = tmp_path / ("a-long-folder-name-" * 4) / "problems"
    copy_problem(deep, "mmul")
    (entry,) = scan_problems(deep)
    first = describe(entry, width=60).plain.splitlines()[0]
    assert len(first) <= 60 and first.startswith("mmul  …/") and first.endswith("/problems/mmul")


async def test_the_quit_dialog_speaks_the_apps_words(run: Run) -> None:
    async with run.app().run_test(size=(80, 24)) as pilot:
        await start(pilot, run)
        await pilot.press("q")
        await settle(pilot)
        assert isinstance(pilot.app.screen, QuitScreen)
        text = " ".join(str(w.content) for w in pilot.app.screen.query(Static))
        assert "--resume" not in text and "resuming the run continues it later" in text


async def test_selected_text_stays_readable_in_greys(run: Run, monkeypatch) -> None:
    """NO_COLOR draws greys by luminance: the selection's text and background must not become
    the same grey (Textual's own selection colours do), so selected log text stays visible."""
    from textual.filter import monochrome_style

    monkeypatch.setenv("NO_COLOR", "1")
    async with run.app().run_test(size=(80, 24)) as pilot:
        await start(pilot, run)
        style = monochrome_style(pilot.app.screen.get_component_rich_style("screen--selection"))
        assert style.color is not None and style.bgcolor is not None
        fg, bg = style.color.get_truecolor(), style.bgcolor.get_truecolor()
        assert abs(sum(fg) - sum(bg)) > 3 * 100, (fg, bg)  # far apart, not merely different
