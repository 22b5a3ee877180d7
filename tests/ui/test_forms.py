"""The new-problem and clone dialogs: valid input makes a directory, mistakes are shown inline."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Input, Static, TextArea
from ui_helpers import Run, settle, start

from cacao_tui.ui.app import NewProblemApp
from cacao_tui.ui.screens.clone import CloneScreen
from cacao_tui.ui.screens.new_problem import NewProblemScreen


def shown(widget: Static) -> str:
    return str(widget.content)


async def fill(pilot, selector: str, text: str) -> None:
    box = pilot.app.screen.query_one(selector, Input)
    box.value = text
    await pilot.pause()


async def test_new_problem_form_writes_a_checked_problem(tmp_path: Path) -> None:
    app = NewProblemApp(tmp_path)
    async with app.run_test(size=(100, 50)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, NewProblemScreen)
        await fill(pilot, "#name", "saxpy")
        await fill(pilot, "#description", "Y = a*X + Y")
        app.screen.query_one("#create").press()
        await settle(pilot)
        await pilot.pause(0.2)
        await settle(pilot)
    assert app.return_value == tmp_path / "saxpy"
    assert (tmp_path / "saxpy" / "problem.yaml").is_file()
    assert (tmp_path / "saxpy" / "inputs.yaml").is_file()
    assert (tmp_path / "saxpy" / "ref_kernel.cu").is_file()


async def test_new_problem_mistakes_are_shown_inline_and_nothing_is_written(tmp_path: Path) -> None:
    app = NewProblemApp(tmp_path)
    async with app.run_test(size=(100, 50)) as pilot:
        await settle(pilot)
        screen = app.screen
        await fill(pilot, "#name", "bad name!")
        screen.query_one("#create").press()
        await settle(pilot)
        assert "✗" in shown(screen.query_one("#form-errors", Static))
        await fill(pilot, "#name", "ok_name")
        screen.query_one("#args", TextArea).text = "- {kind: buffer, name: X, size: N}\n"  # no validated buffer
        screen.query_one("#create").press()
        await settle(pilot)
        error = shown(screen.query_one("#form-errors", Static))
        assert "✗" in error and "inputs.yaml" in error
        screen.query_one("#args", TextArea).text = "- [unclosed\n"
        screen.query_one("#create").press()
        await settle(pilot)
        assert "not YAML" in shown(screen.query_one("#form-errors", Static))
        await pilot.press("escape")
        await settle(pilot)
    assert app.return_value is None
    assert list(tmp_path.iterdir()) == []


async def test_clone_from_the_palette_copies_the_problem(run: Run) -> None:
    (run.layout.problem_dir / "problem.yaml").write_text("name: mmul\n")
    async with run.app().run_test(size=(100, 30)) as pilot:
        app = await start(pilot, run)
        await app.main_screen.run_action("clone_problem")
        await settle(pilot)
        assert isinstance(app.screen, CloneScreen)
        await pilot.press(*"mmul", "enter")  # exists already
        await settle(pilot)
        assert "already exists" in shown(app.screen.query_one("#clone-errors", Static))
        app.screen.query_one("#clone-name", Input).value = "mmul_v2"
        await pilot.press("enter")
        await settle(pilot)
        await pilot.pause(0.2)
        assert app.screen is app.main_screen
    target = run.layout.problem_dir.parent / "mmul_v2"
    assert (target / "problem.yaml").read_text().startswith("name: mmul_v2")
    assert not (target / "output").exists()


async def test_palette_lists_new_problem_and_clone(run: Run) -> None:
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        titles = [c.title for c in app.get_system_commands(app.main_screen)]
        assert "New problem…" in titles and "Clone this problem…" in titles
        assert "Pause / resume branch" in titles
        await app.main_screen.run_action("new_problem")
        await settle(pilot)
        assert isinstance(app.screen, NewProblemScreen)
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is app.main_screen
