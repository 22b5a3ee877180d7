"""The engine's side of steering: watch the branches' inboxes, start a worker for a finished
branch that was sent a command, and carry out deletes.

Messages, reverts and changed decisions are applied by the branch's own worker (the only
writer of its files). A delete is the engine's: it stops the branch's worker and those of
the branches grown from it, then moves their directories into ``output/trash/`` with one
rename each (nothing is lost; a name in the trash is never created again, so a --resume
does not bring a deleted branch back).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Protocol

from cacao_tui.engine.branch_files import RunFiles
from cacao_tui.engine.control import descendants, trash_branches, trash_dir
from cacao_tui.engine.events import BranchRemoved, EventBus
from cacao_tui.engine.worker import BranchWorker
from cacao_tui.store.atomic import StateFileError
from cacao_tui.store.inbox import has_pending, inbox_dir, pending_commands
from cacao_tui.store.layout import RunLayout

WATCH_S = 0.5  # how often the inboxes are looked at while the run is live


class SteeringHost(Protocol):
    """What steering needs from the engine that runs it (the engine imports this module, not
    the other way round)."""

    bus: EventBus
    layout: RunLayout
    files: RunFiles
    workers: dict[str, BranchWorker]
    tasks: dict[str, asyncio.Task[None]]

    def spawn(self, name: str) -> None: ...
    def recompute_best(self) -> None: ...


class Steering:
    def __init__(self, engine: SteeringHost) -> None:
        self.engine = engine
        self._started_for: dict[str, frozenset[str]] = {}

    async def watch(self) -> None:
        """Until cancelled: act on new commands (the CLI writes them from another process)."""
        while True:
            await self.tick()
            await asyncio.sleep(WATCH_S)

    async def tick(self) -> None:
        layout = self.engine.layout
        for name in layout.branch_names():
            branch = layout.branch(name)
            if not inbox_dir(branch).is_dir():
                continue
            try:
                m = self.engine.files.branch(name).manifest()
            except (StateFileError, OSError):
                continue
            if not has_pending(branch, m.applied):
                continue
            inbox = pending_commands(branch, m.applied)
            if any(c.kind == "delete" for c in inbox.commands):
                await self.delete(name)
                continue
            if not inbox.commands and not inbox.unreadable:
                continue
            task = self.engine.tasks.get(name)
            worker = self.engine.workers.get(name)
            if task is not None and not task.done() and worker is not None:
                worker.wake.set()  # a paused worker applies it now; a busy one at its next step
                continue
            key = frozenset(c.id for c in inbox.commands) | frozenset(inbox.unreadable)
            if self._started_for.get(name) != key:  # once per set of commands, never a spawn loop
                self._started_for[name] = key
                self.engine.spawn(name)

    async def apply_deletes(self) -> None:
        """Before any branch starts (on --resume): the deletes queued between runs."""
        layout = self.engine.layout
        for name in layout.branch_names():
            branch = layout.branch(name)
            if not branch.root.is_dir() or not inbox_dir(branch).is_dir():
                continue
            try:
                m = self.engine.files.branch(name).manifest()
            except (StateFileError, OSError):
                continue
            if any(c.kind == "delete" for c in pending_commands(branch, m.applied).commands):
                await self.delete(name)

    async def delete(self, name: str) -> list[str]:
        """Stop the branch and its descendants, then move their directories to the trash."""
        engine, layout = self.engine, self.engine.layout
        if not layout.branch(name).manifest.exists():
            return []
        names = [name, *descendants(layout, name)]
        tasks = []
        for n in names:
            worker, task = engine.workers.get(n), engine.tasks.get(n)
            if worker is not None:
                worker.request_kill()
            if task is not None and not task.done():
                task.cancel()
                tasks.append(task)
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        moved = []
        for n, target in trash_branches(layout, names):
            engine.files.forget(n)
            engine.pool.forget(n)
            moved.append(n)
            engine.bus.emit(BranchRemoved(branch=n, trash=str(target)))
        engine.recompute_best()
        if moved:
            where = trash_dir(layout)
            engine.bus.log(f"deleted {', '.join(moved)}: moved to {where} (nothing is lost)", level="warning")
        return moved
