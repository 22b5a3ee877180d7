"""A new problem goes where the home list shows it (issue 32 items 1 and 14): `n`, a relative
*Directory* (`vadd`) is under the problems folder, not the working directory; the form shows the
full path it will write; the name and the reference function follow the new name."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from textual.widgets import Input, Static
from ui_helpers import until

from cacao_tui.ui.editor import ProblemEditorScreen
from cacao_tui.ui.home.home_app import HomeApp
from tests.runs.run_files import copy_problem


def _plain(renderable: object) -> str:
    console = Console(width=400, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


async def _set(pilot: object, screen: ProblemEditorScreen, selector: str, text: str) -> None:
    widget = screen.query_one(selector, Input)
    widget.value = text
    for _ in widget.ancestors_with_self:
        await pilot.pause()  # type: ignore[attr-defined]


async def test_a_relative_directory_goes_under_the_problems_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "problems"
    copy_problem(folder, "mmul")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the working directory is not the problems folder's parent
    app = HomeApp(folder)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.home.scans > 0, "the list")
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, ProblemEditorScreen), "the editor")
        screen: ProblemEditorScreen = app.screen  # type: ignore[assignment]
        await _set(pilot, screen, "#ed-directory", "vadd")
        note = _plain(screen.query_one("#ed-directory-full", Static).content)
        assert f"→ {folder / 'vadd'}" in note and "not in" not in note, note
        # The new name follows, and so does the reference function still named after the old one.
        assert screen.query_one("#ed-name", Input).value == "vadd"
        assert screen.query_one("#ed-ref-function", Input).value == "vadd_ref"
        await until(pilot, lambda: "vadd_ref" in screen.source.reference_text, "the stub's new name")
        await until(pilot, lambda: screen.checks_run > 0 and not screen.workers, "the check", timeout=80)
        await pilot.press("ctrl+s")
        await until(pilot, lambda: not isinstance(app.screen, ProblemEditorScreen), "the save", timeout=80)
        await until(pilot, lambda: "vadd" in app.home.entries, "the list shows it")
        assert any(f"Saved the new problem to {folder / 'vadd'}" in n.message for n in app._notifications)
    assert (folder / "vadd" / "problem.yaml").is_file() and not (elsewhere / "vadd").exists()
    text = (folder / "vadd" / "problem.yaml").read_text()
    assert "vadd_ref" in text and "new_problem_ref" not in text


async def test_an_absolute_directory_elsewhere_is_said_and_a_chosen_function_stays(tmp_path: Path) -> None:
    folder = tmp_path / "problems"
    folder.mkdir()
    app = HomeApp(folder)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.home.scans > 0, "the list")
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, ProblemEditorScreen), "the editor")
        screen: ProblemEditorScreen = app.screen  # type: ignore[assignment]
        await _set(pilot, screen, "#ed-ref-function", "my_reference")
        await _set(pilot, screen, "#ed-directory", str(tmp_path / "away"))
        note = _plain(screen.query_one("#ed-directory-full", Static).content)
        assert f"→ {tmp_path / 'away'}" in note and f"not in {folder}" in note, note
        assert screen.query_one("#ed-name", Input).value == "away"
        assert screen.query_one("#ed-ref-function", Input).value == "my_reference"  # the user's: kept
