"""Helpers of the UI tests: a run written by the FAKE scripted engine, the app on it, and waiting for it."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from scripted_engine import T0, make_run, run_started

from cacao_tui.ui.app import CacaoApp

FIXED_ROOT = Path("/tmp/cacao-ui-fixture")  # snapshots show paths: keep them the same on every machine


class Run:
    def __init__(self, root: Path) -> None:
        self.layout, self.bus, self.engine = make_run(root)

    def app(self, **kwargs: object) -> CacaoApp:
        return CacaoApp(
            engine=self.engine, bus=self.bus, run_info=run_started(self.layout), clock=lambda: T0 + 125, **kwargs
        )  # type: ignore[arg-type]


def fixed_run() -> Run:
    """A run at a fixed path, for snapshots (they show paths)."""
    if FIXED_ROOT.exists():
        shutil.rmtree(FIXED_ROOT)
    return Run(FIXED_ROOT)


async def settle(pilot: object, app: CacaoApp | None = None) -> None:
    """Let buffered events flush, file reads finish and the screen repaint."""
    app = app or pilot.app  # type: ignore[attr-defined]
    for _ in range(3):
        await pilot.pause()  # type: ignore[attr-defined]
        if isinstance(app, CacaoApp):
            app.flush_events()
        await app.workers.wait_for_complete()
    await pilot.pause()  # type: ignore[attr-defined]


async def start(pilot: object, run: Run, play: bool = True) -> CacaoApp:
    app: CacaoApp = pilot.app  # type: ignore[attr-defined]
    await settle(pilot)
    if play:
        run.engine.play()
    await settle(pilot)
    return app


async def select(pilot: object, name: str | None, iteration: int | None = None) -> None:
    app: CacaoApp = pilot.app  # type: ignore[attr-defined]
    tree = app.main_screen.branch_tree
    if name is None:
        tree.move_cursor(tree.root)
    elif iteration is None:
        tree.select_branch(name)
    else:
        tree.move_cursor(tree._iterations[(name, iteration)])
    await settle(pilot)


async def until_finished(pilot: object, app: CacaoApp, tries: int = 100) -> None:
    """Until the view has folded the run's end in (an attached view reads it from the run's log)."""
    for _ in range(tries):
        await pilot.pause(0.05)  # type: ignore[attr-defined]
        if app.view.finished is not None:
            break
    await settle(pilot, app)


async def until(pilot: object, predicate: Callable[[], object], what: str = "", timeout: float = 10.0) -> None:
    """Pause 50 ms at a time (``timeout`` seconds' worth of pauses) until ``predicate()`` holds;
    AssertionError naming ``what`` otherwise. Tests wait on a condition, never on a fixed sleep."""
    for _ in range(int(timeout / 0.05)):
        if predicate():
            return
        await pilot.pause(0.05)  # type: ignore[attr-defined]
    raise AssertionError(f"timed out: {what}")
