"""Snapshots (SVG, committed under __snapshots__/) of the main states of the app.

Update after an intended change: pytest tests/ui/test_snapshots.py --snapshot-update
"""

from __future__ import annotations

from scripted_engine import write_final_results
from ui_helpers import fixed_run, select, settle, start

from cacao_tui.ui.app import ResultsApp


def _main_state(branch: str | None = None, iteration: int | None = None, keys: tuple[str, ...] = ()):
    run = fixed_run()

    async def before(pilot) -> None:
        await start(pilot, run)
        if branch is not None:
            await select(pilot, branch, iteration)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)
        pilot.app.clear_notifications()
        await settle(pilot)

    return run.app(), before


def test_main_screen_80x24(snap_compare) -> None:
    app, before = _main_state()
    assert snap_compare(app, terminal_size=(80, 24), run_before=before)


def test_branch_selected_log_160x45(snap_compare) -> None:
    app, before = _main_state("tiled")
    assert snap_compare(app, terminal_size=(160, 45), run_before=before)


def test_llm_tab(snap_compare) -> None:
    app, before = _main_state("tiled", 2, ("2",))
    assert snap_compare(app, terminal_size=(120, 36), run_before=before)


def test_kernel_diff(snap_compare) -> None:
    app, before = _main_state("tiled", 3, ("d",))
    assert snap_compare(app, terminal_size=(120, 36), run_before=before)


def test_tuning_tab(snap_compare) -> None:
    app, before = _main_state("tiled", 2, ("4",))
    assert snap_compare(app, terminal_size=(120, 36), run_before=before)


def test_profile_tab(snap_compare) -> None:
    app, before = _main_state("tiled", 2, ("5",))
    assert snap_compare(app, terminal_size=(120, 36), run_before=before)


def test_help_screen(snap_compare) -> None:
    app, before = _main_state(keys=("question_mark",))
    assert snap_compare(app, terminal_size=(100, 50), run_before=before)


def test_quit_dialog(snap_compare) -> None:
    app, before = _main_state(keys=("q",))
    assert snap_compare(app, terminal_size=(80, 24), run_before=before)


def test_kill_confirmation(snap_compare) -> None:
    app, before = _main_state("tiled-db", None, ("x",))
    assert snap_compare(app, terminal_size=(80, 24), run_before=before)


def test_results_view(snap_compare) -> None:
    run = fixed_run()
    write_final_results(run.layout)

    async def before(pilot) -> None:
        await settle(pilot)

    assert snap_compare(ResultsApp(run.layout), terminal_size=(100, 30), run_before=before)


def test_decision_form(snap_compare) -> None:
    app, before = _main_state("tiled", None, ("c",))
    assert snap_compare(app, terminal_size=(80, 24), run_before=before)


def test_clone_dialog(snap_compare) -> None:
    run = fixed_run()

    async def before(pilot) -> None:
        await start(pilot, run)
        await pilot.app.main_screen.run_action("clone_problem")
        await settle(pilot)

    assert snap_compare(run.app(), terminal_size=(80, 24), run_before=before)


def test_message_form(snap_compare) -> None:
    app, before = _main_state("tiled", None, ("m",))
    assert snap_compare(app, terminal_size=(80, 24), run_before=before)
