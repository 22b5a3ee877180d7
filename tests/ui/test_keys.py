"""Every key of the main screen, driven with Pilot against the FAKE scripted engine."""

from __future__ import annotations

import os
import signal

from rich.console import Console
from textual.command import CommandPalette
from textual.widgets import Input, TabbedContent
from ui_helpers import Run, select, settle, start

from cacao_tui.engine import events as ev
from cacao_tui.ui import keymap
from cacao_tui.ui.run_view import Selection
from cacao_tui.ui.screens.dialogs import ConfirmScreen, QuitScreen
from cacao_tui.ui.screens.help import HelpScreen
from cacao_tui.ui.screens.results import ResultsScreen
from cacao_tui.ui.widgets.branch_tree import BranchTree
from cacao_tui.ui.widgets.kernel_pane import KernelPane


def notifications(app) -> list[str]:
    return [n.message for n in app._notifications]


async def test_p_pauses_and_resumes_the_selected_branch(run: Run) -> None:
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        await select(pilot, "tiled")
        await pilot.press("p")
        await settle(pilot)
        assert run.engine.calls[-1] == ("toggle_pause", "tiled")
        assert app.view.branches["tiled"].status == "paused"
        assert "‖ tiled" in str(app.main_screen.branch_tree._branches["tiled"].label)
        await pilot.press("p")
        await settle(pilot)
        assert app.view.branches["tiled"].status == "running"


async def test_branch_keys_without_a_branch_say_so(run: Run) -> None:
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        await select(pilot, None)
        for key in ("p", "x", "plus", "minus", "r"):
            await pilot.press(key)
        await settle(pilot)
        assert run.engine.calls == []
        assert sum("Select a branch" in m for m in notifications(app)) == 5


async def test_shift_p_pauses_all_then_resumes_all(run: Run) -> None:
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        await pilot.press("P")
        await settle(pilot)
        assert ("pause_all",) in run.engine.calls
        assert {b.status for b in app.view.branches.values() if b.active} == {"paused"}
        await pilot.press("P")
        await settle(pilot)
        assert run.engine.calls[-1] == ("resume_all",)
        assert app.view.branches["tiled"].status == "running"


async def test_x_asks_before_killing(run: Run) -> None:
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        await select(pilot, "tiled-db")
        await pilot.press("x")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        await settle(pilot)
        assert not isinstance(app.screen, ConfirmScreen)
        assert run.engine.calls == []
        await pilot.press("x")
        await pilot.press("y")
        await settle(pilot)
        assert run.engine.calls == [("kill_branch", "tiled-db")]
        assert app.view.branches["tiled-db"].status == "killed"


async def test_plus_and_minus_change_max_iter(run: Run) -> None:
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        await select(pilot, "tiled")
        await pilot.press("plus", "plus", "minus")
        await settle(pilot)
        assert run.engine.calls == [
            ("change_max_iter", "tiled", 1),
            ("change_max_iter", "tiled", 1),
            ("change_max_iter", "tiled", -1),
        ]
        assert app.view.branches["tiled"].max_iter == 6
        assert "2/6" in str(app.main_screen.branch_tree._branches["tiled"].label)
        await pilot.press("equals_sign")  # "=" is "+" without shift
        await settle(pilot)
        assert app.view.branches["tiled"].max_iter == 7


async def test_r_retries_a_failed_branch_and_reports_a_refusal(run: Run) -> None:
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        await select(pilot, "vectorized")
        await pilot.press("r")
        await settle(pilot)
        assert run.engine.calls == [("retry_branch", "vectorized")]
        assert app.view.branches["vectorized"].status == "running"
        await select(pilot, "tiled")
        await pilot.press("r")
        await settle(pilot)
        assert any("only failed or stopped" in m for m in notifications(app))


async def test_slash_filters_the_log_and_escape_clears_it(run: Run) -> None:
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        pane = app.main_screen.details.log_pane
        everything = len(pane.log_widget.lines)
        await pilot.press("slash")
        await settle(pilot)
        assert isinstance(app.focused, Input)
        await pilot.press(*"compile")
        await settle(pilot)
        lines = pane.log_widget.lines
        assert lines and all("compile" in line.lower() for line in lines)
        assert len(lines) < everything
        await pilot.press("enter")  # keeps the filter, back to the log
        await settle(pilot)
        assert pane.needle == "compile"
        await pilot.press("escape")
        await settle(pilot)
        assert pane.needle == ""
        assert len(pane.log_widget.lines) == everything


async def test_letters_typed_in_the_filter_do_not_control_branches(run: Run) -> None:
    async with run.app().run_test() as pilot:
        await start(pilot, run)
        await select(pilot, "tiled")
        await pilot.press("slash", "p", "x", "q", "r")
        await settle(pilot)
        assert run.engine.calls == []


async def test_j_k_and_arrows_move_through_the_tree(run: Run) -> None:
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        await select(pilot, None)
        await pilot.press("j")
        await settle(pilot)
        assert app.main_screen.selection == Selection("tiled")
        await pilot.press("down", "down")
        await settle(pilot)
        assert app.main_screen.selection == Selection("tiled", 2)
        await pilot.press("k", "up")
        await settle(pilot)
        assert app.main_screen.selection == Selection("tiled")


async def test_tab_moves_between_panes(run: Run) -> None:
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        assert isinstance(app.focused, BranchTree)
        await pilot.press("tab")
        await settle(pilot)
        assert not isinstance(app.focused, BranchTree)
        await pilot.press("shift+tab")
        await settle(pilot)
        assert isinstance(app.focused, BranchTree)


async def test_number_keys_switch_tabs(run: Run) -> None:
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        tabs = app.main_screen.query_one(TabbedContent)
        for key, tab in zip("23451", ("llm", "kernel", "tuning", "profile", "log"), strict=True):
            await pilot.press(key)
            await settle(pilot)
            assert tabs.active == tab


async def test_d_switches_kernel_source_and_diff(run: Run) -> None:
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        await select(pilot, "tiled", 3)
        await pilot.press("d")
        await settle(pilot)
        pane = app.main_screen.query_one(KernelPane)
        assert app.main_screen.query_one(TabbedContent).active == "kernel"
        assert pane.mode == "diff"
        assert "Kernel diff vs iter2" in pane.query_one("#kernel-header").content.plain
        await pilot.press("d")
        assert pane.mode == "source"


async def test_question_mark_lists_every_key(run: Run) -> None:
    async with run.app().run_test(size=(120, 60)) as pilot:
        app = await start(pilot, run)
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        console = Console(width=120, record=True)
        console.print(app.screen.query_one("#help-table").content)
        shown = console.export_text()
        for key in (*keymap.MAIN, *keymap.QUIT):
            assert key.help in shown, key
        for command in keymap.PALETTE_ONLY:
            assert command.title in shown
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(app.screen, HelpScreen)


async def test_b_opens_the_results_view_and_escape_returns(run: Run) -> None:
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        await pilot.press("b")
        await settle(pilot)
        assert isinstance(app.screen, ResultsScreen)
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is app.main_screen


async def test_q_after_the_run_finished_exits_with_finished(run: Run) -> None:
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        run.engine.finish()
        await settle(pilot)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_value == "finished"


async def test_q_while_running_can_be_cancelled(run: Run) -> None:
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        await pilot.press("q")
        await settle(pilot)
        assert isinstance(app.screen, QuitScreen)
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is app.main_screen
        assert app.is_running


async def test_q_then_d_detaches_and_leaves_the_engine_alone(run: Run) -> None:
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        await pilot.press("q", "d")
        await pilot.pause()
    assert app.return_value == "detach"
    assert ("stop",) not in run.engine.calls
    before = len(run.bus._subscribers)
    run.bus.emit(ev.LogLine(message="after detach"))  # the app no longer listens
    assert len(run.bus._subscribers) == before == 1  # only the fake engine's own tracker


async def test_q_then_s_stops_the_engine_cleanly(run: Run) -> None:
    run.engine.stop_delay_s = 0.2
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        await pilot.press("q", "s")
        await pilot.pause(0.05)
        assert "Stopping" in str(app.screen.query_one(".dialog-title").content)
        await pilot.pause(0.5)
    assert app.return_value == "stopped"
    assert run.engine.stopped


async def test_sigterm_stops_a_full_screen_run_cleanly(run: Run) -> None:
    """``cacao --dir X`` (the engine in the app's process) gets SIGTERM, as S on the home screen or
    in an attached view sends: every branch stops cleanly and the app leaves as "stop" does, the
    terminal given back, instead of the process dying mid-screen. Our own handler is put back after."""
    heard: list[int] = []

    def ours(signum: int, frame: object) -> None:  # without the app's handler, the signal lands here
        heard.append(signum)

    before = signal.signal(signal.SIGTERM, ours)
    try:
        run.engine.stop_delay_s = 0.2
        async with run.app(stop_on_sigterm=True).run_test() as pilot:
            app = await start(pilot, run)
            os.kill(os.getpid(), signal.SIGTERM)
            await pilot.pause(0.05)
            assert "SIGTERM" in str(app.screen.query_one(".dialog-title").content)
            os.kill(os.getpid(), signal.SIGTERM)  # a second one while stopping changes nothing
            await pilot.pause(0.5)
        assert app.return_value == "stopped"
        assert run.engine.stopped and run.engine.calls.count(("stop",)) == 1
        assert heard == []
        assert signal.getsignal(signal.SIGTERM) is ours
    finally:
        signal.signal(signal.SIGTERM, before)


async def test_ctrl_q_and_ctrl_c_ask_like_q(run: Run) -> None:
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        await pilot.press("ctrl+q")
        await settle(pilot)
        assert isinstance(app.screen, QuitScreen)
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("ctrl+c")
        await settle(pilot)
        assert isinstance(app.screen, QuitScreen)


async def test_ctrl_p_palette_offers_the_same_actions(run: Run) -> None:
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        await select(pilot, "tiled")
        await pilot.press("ctrl+p")
        await settle(pilot)
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"Pause / resume branch")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await settle(pilot)
        assert ("toggle_pause", "tiled") in run.engine.calls


def test_palette_and_footer_come_from_the_one_keymap() -> None:
    actions = {k.action for k in keymap.MAIN}
    for name in ("toggle_pause", "pause_all", "kill", "max_iter(1)", "max_iter(-1)", "retry", "filter", "help", "quit"):
        assert name in actions
    keys = [k for key in keymap.MAIN for k in key.keys.split(",")]
    assert len(keys) == len(set(keys)), "a key is bound twice"
    for key in keys:  # only keys every terminal sends over SSH
        assert (not key.startswith(("f1", "alt+", "meta+", "super+")) and "ctrl+" not in key) or key in ("ctrl+q",)


async def test_m_sends_a_message_to_the_selected_branch(run: Run) -> None:
    from cacao_tui.ui.screens.steering import MessageScreen

    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        await select(pilot, "tiled")
        await pilot.press("m")
        await settle(pilot)
        assert isinstance(app.screen, MessageScreen)
        await pilot.press("enter")  # empty: refused in the form, nothing sent
        await settle(pilot)
        assert isinstance(app.screen, MessageScreen) and run.engine.calls == []
        await pilot.press(*"try tm 16")
        await pilot.press("enter")
        await settle(pilot)
        assert not isinstance(app.screen, MessageScreen)
        assert run.engine.calls == [("send_message", "tiled", "try tm 16")]
        assert any("message queued" in n for n in notifications(app))


async def test_u_reverts_to_the_selected_iteration_and_shows_refusals(run: Run) -> None:
    from cacao_tui.ui.screens.steering import RevertScreen

    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        await select(pilot, "tiled", 1)
        await pilot.press("u")
        await settle(pilot)
        assert isinstance(app.screen, RevertScreen)
        assert app.screen.query_one("#revert-iteration", Input).value == "1"  # the selected iteration
        await pilot.press("enter")
        await settle(pilot)
        assert run.engine.calls[-1] == ("revert_branch", "tiled", 1)
        await pilot.press("u")
        await settle(pilot)
        app.screen.query_one("#revert-iteration", Input).value = "9"
        await pilot.press("enter")
        await settle(pilot)
        assert run.engine.calls[-1] == ("revert_branch", "tiled", 9)
        assert any("revert: tiled: cannot revert" in n for n in notifications(app))


async def test_c_chooses_the_next_decision(run: Run) -> None:
    from cacao_tui.ui.screens.steering import DecisionScreen

    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        await select(pilot, "tiled")
        await pilot.press("c")
        await settle(pilot)
        assert isinstance(app.screen, DecisionScreen)
        await pilot.press("escape")
        await settle(pilot)
        assert run.engine.calls == []
        await pilot.press("c", "b")
        await settle(pilot)
        assert run.engine.calls == [("change_decision", "tiled", "branch")]


async def test_shift_d_asks_then_deletes_and_the_tree_drops_the_branch(run: Run) -> None:
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        await select(pilot, "tiled-db")
        await pilot.press("D")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        await settle(pilot)
        assert run.engine.calls == []
        await pilot.press("D", "y")
        await settle(pilot)
        assert run.engine.calls == [("delete_branch", "tiled-db")]
        assert "tiled-db" not in app.view.branches
        assert "tiled-db" not in app.main_screen.branch_tree._branches
        assert "tiled" in app.main_screen.branch_tree._branches


async def test_steering_keys_without_a_branch_say_so(run: Run) -> None:
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        await select(pilot, None)
        for key in ("m", "u", "c", "D"):
            await pilot.press(key)
        await settle(pilot)
        assert run.engine.calls == []
        assert sum("Select a branch" in m for m in notifications(app)) == 4


async def test_decisions_and_superseded_iterations_in_the_tree(run: Run) -> None:
    from cacao_tui.store.state import Decision

    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        run.bus.emit(
            ev.DecisionMade(
                branch="tiled",
                iteration=2,
                action="continue",
                reason="r",
                decision=Decision(action="continue", reason="r", iteration_summary="tiles -> 1.2 ms"),
            )
        )
        run.bus.emit(ev.IterationStatusChanged(branch="tiled", iteration=1, status="superseded"))
        await settle(pilot)
        tree = app.main_screen.branch_tree
        assert "→ continue · tiles -> 1.2 ms" in str(tree._iterations[("tiled", 2)].label)
        assert "superseded" in str(tree._iterations[("tiled", 1)].label)
