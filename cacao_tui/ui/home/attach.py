"""The view of a run this app does not own: the run view (``CacaoApp``) fed from the run's
event log instead of an in-process engine, steered through the run's files.

Live runs are followed as their log grows; finished ones are shown read-only (their log
replayed once; the steering keys then queue commands for a later --resume, as the CLI's
--branch does). ``q`` leaves the view and the run goes on; stopping the whole run is
``S``, confirmed, and sends SIGTERM to the run's process (a clean stop).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import ClassVar

from textual.screen import Screen

from cacao_tui.engine import events as ev
from cacao_tui.engine.control import SteeringError
from cacao_tui.engine.events import EventBus
from cacao_tui.runs.follow import RunLogFollower
from cacao_tui.runs.launcher import LAUNCH_LOG, Started, log_tail
from cacao_tui.runs.remote_control import RemoteControl
from cacao_tui.settings import DEFAULTS
from cacao_tui.store.layout import RunLayout
from cacao_tui.ui import keymap
from cacao_tui.ui.app import DETACH, CacaoApp
from cacao_tui.ui.home.help import KeysScreen
from cacao_tui.ui.home.keys import ATTACHED, ATTACHED_NOTE
from cacao_tui.ui.home.text_screen import TextScreen
from cacao_tui.ui.run_view import ProcessEnded
from cacao_tui.ui.screens.dialogs import ConfirmScreen
from cacao_tui.ui.screens.main import MainScreen

APP_CSS = str(Path(__file__).resolve().parents[1] / "cacao.tcss")  # the app's styles
POLL_S = 0.25  # how often the run's log is read for new events


class AttachedMainScreen(MainScreen):
    """The run view with the attached run's keys (stop the whole run, its launch log)."""

    BINDINGS: ClassVar = [*keymap.bindings(keymap.MAIN), *keymap.bindings(ATTACHED)]

    def action_help(self) -> None:
        sections = [*keymap.help_sections(), ("Attached run", list(ATTACHED))]
        self.app.push_screen(KeysScreen(sections, ATTACHED_NOTE))

    def action_stop_run(self) -> None:
        app = self.app
        if isinstance(app, AttachApp):
            app.ask_stop()

    def action_launch_log(self) -> None:
        path = self.run_layout.output / LAUNCH_LOG
        lines = log_tail(path, lines=400, limit=256 * 1024)
        body = "\n".join(lines) if lines else f"{path}: no launch log (runs started from the app write one)"
        self.app.push_screen(TextScreen("Launch log", body))


class AttachApp(CacaoApp):
    """Attach to the run of ``problem_dir`` (``started``: the process this app just started)."""

    CSS_PATH = APP_CSS

    def __init__(self, problem_dir: Path, started: Started | None = None, *, poll_interval: float = POLL_S) -> None:
        bus = EventBus()
        self.control = RemoteControl(problem_dir, DEFAULTS.max_iter, on_log=self._log_line)
        self.follower = RunLogFollower(RunLayout(problem_dir).run_log)
        self.started = started
        self.poll_interval = poll_interval
        self._saw_start = False
        self._told_replaced = False
        self._told_end = False
        super().__init__(engine=self.control, bus=bus)

    def _log_line(self, line: str, branch: str | None) -> None:
        self.bus.log(line, branch=branch, level="warning" if "stop" in line or "kill" in line else "info")

    def get_default_screen(self) -> Screen:
        self.main_screen = AttachedMainScreen(self.view, self.store, self.engine, self.clock, id="main")
        return self.main_screen

    def on_mount(self) -> None:  # CacaoApp's own on_mount runs too (Textual calls each class's handler)
        self.set_interval(self.poll_interval, self.poll_run_log)
        self.poll_run_log()

    def poll_run_log(self) -> None:
        """Feed what the run appended to its log into the view, as the engine's bus would."""
        self._feed(self.follower.poll())
        if self.follower.replaced and not self._told_replaced:
            self._told_replaced = True
            self.notify("A new run replaced this one's output/ (it was archived): reopen the problem to follow it",
                        severity="warning", timeout=10)  # fmt: skip
        if not self._told_end and self.view.finished is None:
            self._notice_end()

    def _feed(self, events: list[ev._Event]) -> None:
        for event in events:
            if isinstance(event, ev.RunStarted):
                self._saw_start = True
                self.control.default_max_iter = event.max_iter
            self.bus.emit(event)

    def _notice_end(self) -> None:
        """The run's process is gone and its log has no end: say so once, and why (its launch log)."""
        started = self.started
        if started is not None:
            code = started.exit_code()
            if code is None:
                return
            how, phase = f"exit {code}", f"ended (exit {code})"
        elif self.control.is_running():
            return
        else:  # a run this app did not start: nobody holds its directory any more
            how, phase = "its process is gone", "killed"
        while batch := self.follower.poll():  # all it wrote before it ended (a long log: several reads)
            self._feed(batch)
        if any(isinstance(e, ev.RunFinished) for e in self._events):
            return
        self._told_end = True
        if not self._saw_start:
            phase = "failed to start"
        self._events.append(ProcessEnded(phase, time.time()))  # folded in after the events before it
        if not self._saw_start:
            for line in log_tail(self.control.layout.output / LAUNCH_LOG, lines=4):
                self.bus.log(line, level="error")
            self.notify(f"The run failed to start ({how}); l shows its launch log", severity="error", timeout=10)
        elif self.started is not None:
            self.notify(f"The run ended without finishing ({how}); R on the home screen resumes it",
                        severity="warning", timeout=10)  # fmt: skip

    def is_live(self) -> bool:
        return self.control.is_running()

    async def action_quit(self) -> None:
        """Leave the view at once: the run is a process of its own and goes on."""
        self.detach_from_bus()
        self.exit(DETACH)

    def ask_stop(self) -> None:
        live = self.control.is_running()
        if not live:
            self.notify("The run is not live: nothing to stop", severity="warning")
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_worker(self._stop(), group="stop")

        self.push_screen(
            ConfirmScreen(
                "Stop the whole run?",
                "Every branch stops cleanly (SIGTERM to the run's process); R on the home screen "
                "resumes it later.",
                yes="Stop",
            ),
            answered,
        )

    async def _stop(self) -> None:
        try:
            await self.control.stop()
        except SteeringError as exc:
            self.notify(str(exc), severity="error")
            return
        self.notify("Asked the run to stop cleanly; its branches finish their steps", timeout=8)
