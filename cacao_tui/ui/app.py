"""The Textual front end of a run, and the results view for ``--best``.

The engine runs as a task in the same asyncio loop. The app subscribes to the event bus;
the subscriber only appends to buffers, and a timer folds them into the view ten times a
second, so a burst of log lines costs one redraw, not one per line.

    app = CacaoApp(engine=engine, bus=bus, run_info=run_started)
    result = await app.run_async()   # "finished", "stopped" or "detach"
"""

from __future__ import annotations

import io
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Final, Literal

from textual.app import App, SystemCommand
from textual.screen import Screen

from cacao_tui.engine import events as ev
from cacao_tui.engine.control import EngineControl
from cacao_tui.engine.events import EventBus
from cacao_tui.headless import HeadlessRenderer
from cacao_tui.store.layout import RunLayout
from cacao_tui.ui import keymap
from cacao_tui.ui.formatting import safe_event
from cacao_tui.ui.log_store import LogEntry, LogStore
from cacao_tui.ui.palette import OwnPalette
from cacao_tui.ui.run_view import RunView
from cacao_tui.ui.screens.dialogs import BusyScreen, QuitScreen
from cacao_tui.ui.screens.main import MainScreen
from cacao_tui.ui.screens.results import StandaloneResultsScreen
from cacao_tui.ui.sigterm import SigtermExit
from cacao_tui.ui.terminal_colours import TerminalColours

AppResult = Literal["finished", "stopped", "detach"]
FINISHED: Final = "finished"  # the engine was not running any more when the user quit
STOPPED: Final = "stopped"  # the user chose "stop": engine.stop() was awaited before exiting
DETACH: Final = "detach"  # the user chose "detach": the engine task goes on, headless

FLUSH_INTERVAL_S = 0.1
PENDING_LOG_LINES = 50_000  # between two flushes; past this the oldest are dropped (and counted)


class CacaoApp(OwnPalette, SigtermExit, TerminalColours, App[AppResult]):
    """Watch and steer a running search.

    engine: the running engine (EngineControl; its ``layout`` says where the files are).
    bus: the engine's EventBus; the app subscribes at construction and unsubscribes on exit.
    run_info: the RunStarted event, if it was emitted before the app was constructed.
    clock: wall-clock source for the elapsed time (tests pass a fixed one).
    flush_interval: seconds between folding buffered events into the screen.
    stop_on_sigterm: the app runs the engine in its own process (``cacao --dir X``): SIGTERM
        (the home screen's or an attached view's S, ``kill``) stops every branch cleanly and
        leaves the app as its "stop" choice does, instead of killing the process mid-screen.
        Without it (a view of a run in another process) SIGTERM leaves the view as ``q`` does
        and the run goes on (cacao_tui.ui.sigterm).
    """

    CSS_PATH = "cacao.tcss"
    TITLE = "cacao"

    def __init__(
        self,
        engine: EngineControl,
        bus: EventBus,
        run_info: ev.RunStarted | None = None,
        *,
        clock: Callable[[], float] = time.time,
        flush_interval: float = FLUSH_INTERVAL_S,
        stop_on_sigterm: bool = False,
    ) -> None:
        super().__init__()
        self.stop_on_sigterm = stop_on_sigterm
        self.stopping = False
        self.engine = engine
        self.bus = bus
        self.view = RunView()
        if run_info is not None:
            self.view.apply(run_info)
        self.store = LogStore()
        self.clock = clock
        self.flush_interval = flush_interval
        self._events: list[object] = []
        # Log lines and the other events, in the order they came: the Log tab shows the progress
        # lines of the headless renderer (analysis, strategies, tunings, decisions, bests) among them.
        self._logs: deque[object] = deque(maxlen=PENDING_LOG_LINES)
        self._progress_lines = HeadlessRenderer(io.StringIO())  # only its render(): it prints nothing
        self.dropped_log_lines = 0
        self.flushes = 0
        self._unsubscribe: Callable[[], None] | None = bus.subscribe(self._receive)

    # ---- the subscriber: called synchronously by the engine; must stay cheap ----------
    def _receive(self, event: object) -> None:
        if len(self._logs) == PENDING_LOG_LINES:
            self.dropped_log_lines += 1
        self._logs.append(event)
        if not isinstance(event, ev.LogLine):
            self._events.append(event)

    # ---- lifecycle ---------------------------------------------------------------
    def get_default_screen(self) -> Screen:
        self.main_screen = MainScreen(self.view, self.store, self.engine, self.clock, id="main")
        return self.main_screen

    def on_mount(self) -> None:
        self.set_interval(self.flush_interval, self.flush_events)

    def on_unmount(self) -> None:
        self.detach_from_bus()

    def answer_sigterm(self) -> None:
        if self.stop_on_sigterm:
            self.stop_from_signal()
        else:  # a view of a run in another process (attached): the view leaves, the run goes on
            self.exit(DETACH)

    def stop_from_signal(self) -> None:
        """SIGTERM: the "stop" choice without asking (a second one while stopping changes nothing)."""
        if self.stopping:
            return
        if not self.engine.is_running() and (self.view.info is None or self.view.finished is not None):
            self.exit(FINISHED)
            return
        self.run_worker(self._stop_then_exit("Asked to stop (SIGTERM): stopping every branch cleanly…"),
                        exclusive=True, group="stop")  # fmt: skip

    def detach_from_bus(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    # ---- the flush timer -------------------------------------------------------------
    def flush_events(self) -> None:
        """Fold the buffered events into the view and update only what they changed."""
        if not self.main_screen.ready or not self.main_screen.is_attached or (not self._events and not self._logs):
            return
        # Names and messages come from problem files and the model: made terminal-safe here, once.
        raw, self._events = self._events, []
        events = [safe_event(e) for e in raw]
        safe = {id(r): e for r, e in zip(raw, events, strict=True)}  # the same event, made terminal-safe once
        lines = [safe_event(line) if isinstance(line, ev.LogLine) else safe.get(id(line)) for line in self._logs]
        self._logs.clear()
        self.flushes += 1
        changed: set[str] = set()
        for event in self._coalesce(events):
            changed |= self.view.apply(event)
        entries: list[LogEntry] = []
        for line in lines:
            if isinstance(line, ev.LogLine):
                entries.append(LogEntry.from_event(line))
            elif line is not None:
                entries += self._progress_entries(line)
        for entry in entries:
            self.store.add(entry)
        with self.batch_update():
            self.main_screen.apply(changed, entries, events)

    def _progress_entries(self, event: object) -> list[LogEntry]:
        """What ``cacao --no-ui`` prints for the event, as Log lines (tuning and streaming
        progress throttled as it throttles them; the end with the results table)."""
        try:
            text = self._progress_lines.render(event)  # type: ignore[arg-type]
        except Exception as exc:  # an end whose results cannot be read: the Log says so, the app goes on
            text = f"(the progress line of {type(event).__name__} could not be made: {exc})"
        return LogEntry.progress(event, text) if text else []

    @staticmethod
    def _coalesce(events: list[object]) -> Iterable[object]:
        """Keep only the newest tuning progress of each iteration and the newest progress of
        each LLM call in flight (they are snapshots)."""
        latest: dict[object, int] = {}
        for i, e in enumerate(events):
            if isinstance(e, ev.TuningProgress):
                latest[(e.branch, e.iteration)] = i
            elif isinstance(e, ev.LLMCallProgress):
                latest[e.progress.key] = i
        keep = set(latest.values())
        snapshots = ev.TuningProgress | ev.LLMCallProgress
        return (e for i, e in enumerate(events) if not isinstance(e, snapshots) or i in keep)

    # ---- quitting --------------------------------------------------------------------
    async def action_quit(self) -> None:
        """q, ctrl+q and the palette's Quit: ask while branches run, else leave."""
        if isinstance(self.screen, QuitScreen | BusyScreen):
            return
        # Between RunStarted and RunFinished the run is alive even when no branch task is
        # (the master is still analyzing): leaving then must also ask.
        if not self.engine.is_running() and (self.view.info is None or self.view.finished is not None):
            self.exit(FINISHED)
            return
        running = sum(1 for b in self.view.branches.values() if b.active) or 1
        self.push_screen(QuitScreen(running), self._quit_chosen)

    async def action_help_quit(self) -> None:
        """ctrl+c (where no widget copies with it) asks like q: people press it to stop a run."""
        await self.action_quit()

    def _quit_chosen(self, choice: str | None) -> None:
        if choice == "detach":
            self.detach_from_bus()
            self.exit(DETACH)
        elif choice == "stop":
            self.run_worker(self._stop_then_exit(), exclusive=True, group="stop")

    async def _stop_then_exit(self, message: str = "Stopping every branch cleanly…") -> None:
        self.stopping = True
        self.push_screen(BusyScreen(f"{message}\nrunning steps finish or are cancelled."))
        try:
            await self.engine.stop()
        finally:
            self.exit(STOPPED)

    # ---- command palette: the keymap's actions by name ------------------------------------
    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        if isinstance(screen, MainScreen):
            for key in keymap.palette_entries():
                yield SystemCommand(
                    key.palette or key.help, f"{key.help} (key: {key.shown})", self._palette_action(screen, key.action)
                )
            for command in keymap.PALETTE_ONLY:
                yield SystemCommand(command.title, command.help, self._palette_action(screen, command.action))
        else:
            yield from super().get_system_commands(screen)

    @staticmethod
    def _palette_action(screen: Screen, action: str) -> Callable[[], object]:
        async def run() -> None:
            await screen.run_action(action)

        return run


class ResultsApp(OwnPalette, SigtermExit, TerminalColours, App[None]):
    """``cacao --dir X --best`` without --no-ui: the results view of a run directory."""

    CSS_PATH = "cacao.tcss"
    TITLE = "cacao results"

    def __init__(self, layout: RunLayout) -> None:
        super().__init__()
        self.run_layout = layout

    def get_default_screen(self) -> Screen:
        return StandaloneResultsScreen(self.run_layout)
