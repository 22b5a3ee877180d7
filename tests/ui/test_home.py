"""Pilot tests of the home screen (cacao without --dir), the run dialog and the attached run view.

Runs here are run logs written by hand (tests/runs/run_files.py); the one test that starts
a run replaces the launcher with a FAKE that records what it was asked.
"""

from __future__ import annotations

import asyncio
import io
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from textual.widgets import Checkbox, Input, Select, Static
from ui_helpers import until

from cacao_tui.engine import events as ev
from cacao_tui.runs.launcher import RunOptions, Started
from cacao_tui.store.atomic import write_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.run_lock import acquire_run_lock
from cacao_tui.store.state import BranchConfig, BranchManifest, Strategy
from cacao_tui.ui.home import home_screen as home_module
from cacao_tui.ui.home.attach import AttachApp
from cacao_tui.ui.home.help import KeysScreen
from cacao_tui.ui.home.home_app import HomeApp
from cacao_tui.ui.home.home_screen import HomeChoice, HomeScreen
from cacao_tui.ui.home.keys import ATTACHED, HOME
from cacao_tui.ui.home.run_dialog import FieldError, RunDialog, options_from_fields
from cacao_tui.ui.home.text_screen import TextScreen
from cacao_tui.ui.run_view import Selection
from cacao_tui.ui.screens.dialogs import ConfirmScreen
from cacao_tui.ui.screens.results import ResultsScreen
from tests.runs.run_files import T0, copy_problem, finished_run_events, problems_folder, start_holder, write_log


async def _ready(pilot, app: HomeApp) -> HomeScreen:
    for _ in range(100):
        await pilot.pause(0.02)
        if isinstance(app.screen, HomeScreen) and app.home.scans:
            break
    return app.home


def _plain(widget: Static) -> str:
    """What a Static shows, as plain text (wide, so nothing wraps)."""
    console = Console(width=300, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


def _detail(home: HomeScreen) -> str:
    return _plain(home.query_one("#home-detail", Static))


def test_the_list_shows_each_problem_and_its_last_run(tmp_path: Path) -> None:
    folder = problems_folder(tmp_path / "problems")

    async def go() -> None:
        app = HomeApp(folder)
        async with app.run_test(size=(80, 24)) as pilot:
            home = await _ready(pilot, app)
            table = home.table
            assert [k.value for k in table.rows] == ["mmul", "softmax", "stencil", "transpose"]
            cells = {k.value: [str(c) for c in table.get_row(k)] for k in table.rows}
            assert cells["mmul"][:5] == ["mmul", "cuda", "1", "✓ ok dry", "×3.25"]
            assert cells["stencil"][1:4] == ["cuda", "3", "· not run"]
            assert cells["softmax"][1:4] == ["py", "1", "■ interrupted"]  # its process died
            assert cells["transpose"][1] == "c" and cells["transpose"][3].startswith("▶ running")
            header = _plain(home.query_one("#home-header", Static))
            assert "4 problems" in header and "1 running" in header
            assert "best 1.20 ms ×3.25" in _detail(home)
            await pilot.press("j")
            assert "R resumes it" in _detail(home)  # softmax: its process ended without finishing
            await pilot.press("j", "j")
            assert "held by pid 4242 on gpu-box-2" in _detail(home)

    asyncio.run(go())


def test_the_list_follows_the_disk(tmp_path: Path) -> None:
    folder = tmp_path / "problems"
    copy_problem(folder, "mmul")

    async def go() -> None:
        app = HomeApp(folder)
        async with app.run_test(size=(80, 24)) as pilot:
            home = await _ready(pilot, app)
            assert home.table.row_count == 1
            write_log(folder / "mmul", finished_run_events())
            copy_problem(folder, "second")
            home.refresh_list()
            await until(pilot, lambda: home.table.row_count == 2, "the new problem")
            assert str(home.table.get_cell("mmul", "status")).startswith("✓ ok")

    asyncio.run(go())


def test_empty_folder_says_what_to_do(tmp_path: Path) -> None:
    async def go() -> None:
        app = HomeApp(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            home = await _ready(pilot, app)
            assert "n creates one" in _plain(home.query_one("#home-empty", Static))
            await pilot.press("r")  # nothing to run: a notification, no dialog
            assert isinstance(app.screen, HomeScreen)

    asyncio.run(go())


def test_help_lists_every_key(tmp_path: Path) -> None:
    async def go() -> None:
        app = HomeApp(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await _ready(pilot, app)
            await pilot.press("question_mark")
            assert isinstance(app.screen, KeysScreen)
            text = _flat(app.screen)
            for key in HOME:
                assert key.help[:40] in text
            await pilot.press("escape")
            assert isinstance(app.screen, HomeScreen)
            await pilot.press("q")
            await pilot.pause(0.1)
            assert not app.is_running and app.return_value is None

    asyncio.run(go())


def _flat(screen: KeysScreen) -> str:
    return _plain(screen.query_one("#help-table", Static))


def test_open_results_and_check(tmp_path: Path) -> None:
    folder = problems_folder(tmp_path / "problems")
    broken = copy_problem(folder, "aaa_broken")
    (broken / "inputs.yaml").write_text("args: [{kind: buffer, name: X}]\n")

    async def go() -> None:
        app = HomeApp(folder)
        async with app.run_test(size=(100, 30)) as pilot:
            home = await _ready(pilot, app)
            assert home.current() is not None and home.current().key == "aaa_broken"
            assert "✗" in _detail(home)
            await pilot.press("c")
            assert isinstance(app.screen, TextScreen)
            body = app.screen.query_one("#text-body", Static)
            await until(pilot, lambda: "inputs.yaml" in _plain(body), "the check's error line")
            await pilot.press("escape")
            await pilot.press("j")  # mmul
            await pilot.press("b")
            assert isinstance(app.screen, ResultsScreen)
            await pilot.press("escape")
            await pilot.press("enter")
            await pilot.pause(0.1)
        assert app.return_value == HomeChoice(folder / "mmul")

    asyncio.run(go())


def test_open_a_problem_never_run_says_so(tmp_path: Path) -> None:
    copy_problem(tmp_path, "stencil")

    async def go() -> None:
        app = HomeApp(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await _ready(pilot, app)
            await pilot.press("enter")
            await pilot.pause(0.1)
            assert app.is_running and isinstance(app.screen, HomeScreen)
            assert any("has not been run yet" in n.message for n in app._notifications)

    asyncio.run(go())


def test_delete_asks_then_moves_to_the_trash(tmp_path: Path) -> None:
    folder = tmp_path / "problems"
    problem = copy_problem(folder, "mmul")

    async def go() -> None:
        app = HomeApp(folder)
        async with app.run_test(size=(80, 24)) as pilot:
            home = await _ready(pilot, app)
            await pilot.press("D")
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("n")
            assert problem.is_dir()
            await pilot.press("D", "y")
            await until(pilot, lambda: home.table.row_count == 0, "the list without it")
        (trashed,) = (folder / ".trash").iterdir()
        assert trashed.name.startswith("mmul-") and (trashed / "problem.yaml").is_file()
        assert not problem.exists()

    asyncio.run(go())


def test_clone_adds_and_selects_the_copy(tmp_path: Path) -> None:
    folder = tmp_path / "problems"
    copy_problem(folder, "mmul")
    copy_problem(folder, "zz")

    async def go() -> None:
        app = HomeApp(folder)
        async with app.run_test(size=(80, 24)) as pilot:
            home = await _ready(pilot, app)
            await pilot.press("C")
            fields = app.screen.query
            await until(pilot, lambda: any(f.value == "mmul_v2" for f in fields("#clone-name").results(Input)),
                        "the suggestion, filled in")  # fmt: skip
            await pilot.press("enter")  # takes what the field shows (it used to say: empty name)
            await until(pilot, lambda: home.table.row_count == 3, "the clone in the list")
            await until(pilot, lambda: home.current() is not None and home.current().key == "mmul_v2", "its row")
        assert (folder / "mmul_v2" / "problem.yaml").is_file()

    asyncio.run(go())


def test_stop_asks_then_sends_sigterm_to_the_run(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path, "mmul")
    write_log(problem, finished_run_events()[:4])
    holder = start_holder(problem)

    async def go() -> None:
        app = HomeApp(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            home = await _ready(pilot, app)
            assert "running" in str(home.table.get_cell("mmul", "status"))
            await pilot.press("r")  # a second run over a live one: refused, no dialog
            assert not isinstance(app.screen, RunDialog)
            await pilot.press("S")
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("n")
            assert holder.poll() is None
            await pilot.press("S", "y")
            await pilot.pause(0.2)

    try:
        asyncio.run(go())
        assert holder.wait(timeout=10) == -signal.SIGTERM
    finally:
        if holder.poll() is None:
            holder.kill()


def test_run_dialog_fields_become_options() -> None:
    options = options_from_fields({
        "provider": "replay", "model": "", "strategies": "2", "max_iter": " 3", "max_depth": "1", "path_budget": "0",
        "timeout": "2.5", "gpus": "0, 1", "budget": "", "dry_run": True, "single_shot": False, "resume": False,
    })  # fmt: skip
    assert options == RunOptions(provider="replay", strategies=2, max_iter=3, max_depth=1, path_budget=0,
                                 timeout_s=2.5, gpus=[0, 1], dry_run=True)  # fmt: skip
    assert options_from_fields({"provider": "auto"}).provider is None
    refused = (
        ({"max_iter": "0"}, "max-iter: must be at least 1"),
        ({"gpus": "0,0"}, "listed twice"),
        ({"timeout": "-1"}, "timeout: must be a positive"),
        ({"strategies": "two"}, "whole number"),
    )
    for fields, words in refused:
        with pytest.raises(FieldError, match=words):
            options_from_fields(fields)


def test_run_dialog_checks_then_starts_a_detached_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    problem = copy_problem(tmp_path, "mmul")
    asked: list[tuple[Path, RunOptions]] = []

    def fake_start(directory: Path, options: RunOptions) -> Started:  # FAKE launcher: records, starts nothing
        asked.append((directory, options))
        return Started(4242, directory / "output" / "launch.log", [], None)  # type: ignore[arg-type]

    monkeypatch.setattr(home_module, "start_detached", fake_start)

    async def go() -> None:
        app = HomeApp(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await _ready(pilot, app)
            await pilot.press("r")
            dialog = app.screen
            assert isinstance(dialog, RunDialog)
            labels = [str(o[0]) for o in dialog.query_one("#provider", Select)._options]
            assert any("replay · no key needed" in label for label in labels)
            dialog.query_one("#max_depth", Input).value = "0"
            await pilot.press("ctrl+s")
            errors = dialog.query_one("#run-errors", Static)
            await until(pilot, lambda: "✗" in _plain(errors), "the refusal")
            assert "depth: must be at least 1" in _plain(errors) and not asked
            dialog.query_one("#max_depth", Input).value = "1"
            dialog.query_one("#provider", Select).value = "replay"
            dialog.query_one("#dry_run", Checkbox).value = True
            await pilot.press("ctrl+s")
            await until(pilot, lambda: bool(asked), "the launch")
            await pilot.pause(0.1)
        assert asked == [(problem, RunOptions(provider="replay", max_depth=1, dry_run=True))]
        assert isinstance(app.return_value, HomeChoice) and app.return_value.started.pid == 4242

    asyncio.run(go())


def test_run_dialog_cancel_writes_nothing(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path, "mmul")
    write_log(problem, finished_run_events())

    async def go() -> None:
        app = HomeApp(tmp_path)
        async with app.run_test(size=(80, 24)) as pilot:
            await _ready(pilot, app)
            await pilot.press("a")  # run again: the dialog is filled in from the last run
            dialog = app.screen
            assert isinstance(dialog, RunDialog)
            assert dialog.query_one("#provider", Select).value == "replay"
            assert dialog.query_one("#max_iter", Input).value == "3"
            assert dialog.query_one("#dry_run", Checkbox).value is True
            await pilot.press("escape")
            assert isinstance(app.screen, HomeScreen)
        assert sorted(p.name for p in (problem / "output").iterdir()) == ["run.jsonl"]
        assert not (problem / "archive").exists()

    asyncio.run(go())


def test_edit_opens_the_editor(tmp_path: Path) -> None:
    from cacao_tui.ui.editor import ProblemEditorScreen

    problem = copy_problem(tmp_path, "mmul")

    async def go() -> None:
        app = HomeApp(tmp_path)
        async with app.run_test(size=(100, 30)) as pilot:
            await _ready(pilot, app)
            await pilot.press("e")
            await pilot.pause(0.1)
            assert type(app.screen) is ProblemEditorScreen and not app.screen.new
            assert app.screen.directory == problem.resolve()

    asyncio.run(go())


# ---- the attached run view ---------------------------------------------------------------------


def _branch_files(problem: Path, name: str, status: str) -> None:
    branch = RunLayout(problem).branch(name)
    branch.root.mkdir(parents=True, exist_ok=True)
    manifest = BranchManifest(name=name, title="t", strategy=Strategy(name=name, title="t", description="d"),
                              status=status)  # fmt: skip
    write_model(branch.manifest, manifest)


def test_attach_follows_a_live_log_and_steers_through_files(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path, "mmul")
    events = finished_run_events()
    write_log(problem, events[:6])  # started, dispatched, two branches, b1 running
    _branch_files(problem, "b1-tiling", "running")
    _branch_files(problem, "b2-strip", "running")
    lock = acquire_run_lock(problem)  # live: this process holds it

    async def go() -> None:
        app = AttachApp(problem, poll_interval=0.05)
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: "b2-strip" in app.view.branches, "the branches from the log")
            assert app.control.default_max_iter == 3 and app.view.finished is None
            tree = app.main_screen.branch_tree
            # The tree is refreshed from the view on the next poll, and the selection follows the
            # cursor through a message: wait for each, or "p" may find no branch selected yet.
            await until(pilot, lambda: tree.root.children and "b1-tiling" in str(tree.root.children[0].label),
                        "the branches in the tree")  # fmt: skip
            await pilot.press("j")  # the first branch
            assert tree.cursor_node is not None
            await until(pilot, lambda: app.main_screen.selection.branch == "b1-tiling", "b1-tiling selected")
            await pilot.press("p")  # pause: written to branch_config.json, for the run's worker
            cfg = RunLayout(problem).branch("b1-tiling").config
            await until(pilot, cfg.exists, "branch_config.json")
            assert BranchConfig.model_validate_json(cfg.read_text()).paused
            write_log(problem, events[6:])  # the run goes on and finishes
            await until(pilot, lambda: app.view.finished is not None, "the run's end")
            assert app.view.finished.status == "ok"
            await pilot.press("question_mark")
            text = _flat(app.screen)
            assert all(k.help[:25] in text for k in ATTACHED)
            await pilot.press("escape")
            await pilot.press("q")  # leaves at once: the run is not the app's
        assert app.return_value == "detach"

    try:
        asyncio.run(go())
    finally:
        lock.release()


def test_attach_stop_asks_and_signals_only_when_confirmed(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path, "mmul")
    write_log(problem, finished_run_events()[:4])
    holder = start_holder(problem)

    async def go() -> None:
        app = AttachApp(problem, poll_interval=0.05)
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: app.view.info is not None, "the run")
            await pilot.press("S")
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("n")
            await pilot.pause(0.1)
            assert holder.poll() is None
            await pilot.press("S", "y")
            await pilot.pause(0.3)

    try:
        asyncio.run(go())
        assert holder.wait(timeout=10) == -signal.SIGTERM
    finally:
        if holder.poll() is None:
            holder.kill()


def test_attach_to_a_finished_run_is_read_only_and_stop_does_nothing(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path, "mmul")
    write_log(problem, finished_run_events(), mtime=T0)

    async def go() -> None:
        app = AttachApp(problem, poll_interval=0.05)
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: app.view.finished is not None, "the replayed log")
            await pilot.press("S")
            assert not isinstance(app.screen, ConfirmScreen)
            assert any("not live" in n.message for n in app._notifications)
            await pilot.press("b")
            assert isinstance(app.screen, ResultsScreen)

    asyncio.run(go())


def test_a_run_that_ends_at_once_shows_its_launch_log(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path, "mmul")
    log = problem / "output" / "launch.log"
    log.parent.mkdir(parents=True)
    log.write_text("== started\ncacao: GPU 7 does not exist on this machine (GPUs: 0)\n")
    process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(2)"])
    process.wait()
    started = Started(process.pid, log, [], process)

    async def go() -> None:
        app = AttachApp(problem, started, poll_interval=0.05)
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: any("failed to start (exit 2)" in n.message for n in app._notifications),
                        "the notice")  # fmt: skip
            await until(pilot, lambda: app.view.phase == "failed to start", "the view says so")
            await until(pilot, lambda: any("GPU 7 does not exist" in line for line in app.store.lines(Selection())),
                        "the log's lines in the view")  # fmt: skip

    asyncio.run(go())


def test_events_of_the_log_reach_the_view_like_the_bus(tmp_path: Path) -> None:
    """A replayed log and a live bus build the same tree (the attach view is the run view)."""
    problem = copy_problem(tmp_path, "mmul")
    write_log(problem, finished_run_events())

    async def go() -> None:
        app = AttachApp(problem, poll_interval=0.05)
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: app.view.finished is not None, "the end")
            b1 = app.view.branches["b1-tiling"]
            assert (b1.status, b1.best_ms) == ("done", 1.2)
            assert app.view.branches["b2-strip"].status == "failed"
            assert isinstance(app.view.info, ev.RunStarted)

    asyncio.run(go())
