"""Snapshots (SVG, under __snapshots__/) of the home screen, its help, the run dialog and an
attached run's view. Update after an intended change:
pytest tests/ui/test_home_snapshots.py --snapshot-update
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cacao_tui.llm.registry import PROVIDERS, SELECTION_VARS
from cacao_tui.ui.home.attach import AttachApp
from cacao_tui.ui.home.home_app import HomeApp
from cacao_tui.ui.home.home_screen import HomeScreen
from tests.runs.run_files import T0, copy_problem, finished_run_events, problems_folder, write_log


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The four-problem folder, shown relative to the working directory; no provider keys set."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for entry in PROVIDERS:
        for var in (*entry.key_vars, *([entry.base_var] if entry.base_var else [])):
            monkeypatch.delenv(var, raising=False)
    for var in SELECTION_VARS:
        monkeypatch.delenv(var, raising=False)
    return problems_folder(tmp_path / "problems")


async def _home_ready(pilot) -> None:
    app = pilot.app
    for _ in range(200):
        await pilot.pause(0.02)
        if isinstance(app.screen, HomeScreen) and app.home.scans:
            break
    await pilot.pause(0.1)


def _keys(*keys: str):
    async def before(pilot) -> None:
        await _home_ready(pilot)
        for key in keys:
            await pilot.press(key)
            await pilot.pause(0.2)
        pilot.app.clear_notifications()
        await pilot.pause(0.1)

    return before


def test_home_80x24(snap_compare, folder: Path) -> None:
    assert snap_compare(HomeApp(folder), terminal_size=(80, 24), run_before=_keys())


def test_home_200x60_on_a_live_run(snap_compare, folder: Path) -> None:
    assert snap_compare(HomeApp(folder), terminal_size=(200, 60), run_before=_keys("j", "j", "j"))


def test_home_help(snap_compare, folder: Path) -> None:
    assert snap_compare(HomeApp(folder), terminal_size=(80, 24), run_before=_keys("question_mark"))


def test_run_dialog_80x24(snap_compare, folder: Path) -> None:
    assert snap_compare(HomeApp(folder), terminal_size=(80, 24), run_before=_keys("a"))


def test_attached_finished_run_80x24(snap_compare, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    problem = copy_problem(tmp_path, "mmul")
    write_log(problem, finished_run_events(), mtime=T0)
    app = AttachApp(problem, poll_interval=0.05)
    app.clock = lambda: T0 + 60

    async def before(pilot) -> None:
        for _ in range(200):
            await pilot.pause(0.02)
            if app.view.finished is not None and app.main_screen.ready:
                break
        await pilot.press("j")
        await pilot.pause(0.3)
        app.clear_notifications()
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=(80, 24), run_before=before)
