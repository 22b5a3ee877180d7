"""The clone dialog (valid input makes a directory, mistakes are shown inline) and the palette's
New problem… (the problem editor)."""

from __future__ import annotations

from textual.widgets import Input, Static
from ui_helpers import Run, settle, start

from cacao_tui.ui.editor import ProblemEditorScreen
from cacao_tui.ui.screens.clone import CloneScreen


def shown(widget: Static) -> str:
    return str(widget.content)


async def test_clone_from_the_palette_copies_the_problem(run: Run) -> None:
    (run.layout.problem_dir / "problem.yaml").write_text("name: mmul\n")
    async with run.app().run_test(size=(100, 30)) as pilot:
        app = await start(pilot, run)
        await app.main_screen.run_action("clone_problem")
        await settle(pilot)
        assert isinstance(app.screen, CloneScreen)
        name = app.screen.query_one("#clone-name", Input)
        assert name.value == "mmul_v2"  # the suggestion is the field's value: Enter takes it
        name.value = "mmul"  # exists already
        await pilot.press("enter")
        await settle(pilot)
        assert "already exists" in shown(app.screen.query_one("#clone-errors", Static))
        name.value = ""
        await pilot.press("enter")
        await settle(pilot)
        error = shown(app.screen.query_one("#clone-errors", Static))
        assert error.startswith("✗ ") and "--clone" not in error  # the dialog's words, not the flag's
        name.value = "mmul_v2"
        await pilot.press("enter")
        await settle(pilot)
        await pilot.pause(0.2)
        assert app.screen is app.main_screen
    target = run.layout.problem_dir.parent / "mmul_v2"
    source = run.layout.problem_dir / "problem.yaml"
    assert (target / "problem.yaml").read_text() == source.read_text()  # verbatim, as the original's clone
    assert not (target / "output").exists()


async def test_palette_lists_new_problem_and_clone(run: Run) -> None:
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        titles = [c.title for c in app.get_system_commands(app.main_screen)]
        assert "New problem…" in titles and "Clone this problem…" in titles
        assert "Pause / resume branch" in titles
        await app.main_screen.run_action("new_problem")
        await settle(pilot)
        # The palette's New problem… is the problem editor, on a free name beside this problem.
        assert isinstance(app.screen, ProblemEditorScreen) and app.screen.new
        assert app.screen.directory == run.layout.problem_dir.parent / "new-problem"
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is app.main_screen
