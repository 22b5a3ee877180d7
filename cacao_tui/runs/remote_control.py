"""Steering a run that another process owns, through the same files the CLI writes.

``EngineControl`` for the app when it is attached to a run it did not start: pause,
resume, kill and max_iter go through ``branch_config.json``; messages, reverts, decisions,
deletes and retries through the branch's inbox (the run's workers read both at their next
step; ``cacao_tui.engine.control``). Nothing here signals a branch. Only ``stop()``, the
user's "stop the whole run" (confirmed in the app), sends SIGTERM to the run's process,
which stops it cleanly (the same as Ctrl-C in its terminal): ``--resume`` continues it.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

from cacao_tui.engine.control import (
    SteeringError,
    branch_of,
    queue_decision,
    queue_delete,
    queue_message,
    queue_revert,
    read_branch_config,
    update_branch_config,
)
from cacao_tui.runs.liveness import live_run
from cacao_tui.store.atomic import StateFileError, read_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.run_lock import holds_lock, lock_path
from cacao_tui.store.state import TERMINAL_BRANCH, BranchManifest

NOT_LIVE = " (the run is not live: resuming it applies this)"


class RemoteControl:
    """EngineControl over the files of a run directory.

    default_max_iter: the run's max_iter (from its RunStarted event), for branches with no
    branch_config.json yet. on_log: shows a line in the app's log (the run's own log is
    the run's to write).
    """

    def __init__(
        self, problem_dir: Path, default_max_iter: int, on_log: Callable[[str, str | None], None] | None = None
    ) -> None:
        self.layout = RunLayout(problem_dir)
        self.default_max_iter = default_max_iter
        self.on_log = on_log or (lambda _line, _branch: None)
        self.signalled: int | None = None  # the pid stop() sent SIGTERM to

    def _live_suffix(self) -> str:
        return "" if self.is_running() else NOT_LIVE

    def _update(self, name: str, **changes: object) -> None:
        branch_of(self.layout, name)  # an unknown name is one line, not a new directory
        update_branch_config(self.layout.branch(name), self.default_max_iter, **changes)

    def _status(self, name: str) -> str | None:
        try:
            return read_model(self.layout.branch(name).manifest, BranchManifest).status
        except (StateFileError, OSError):
            return None

    def pause_branch(self, name: str) -> None:
        self._update(name, paused=True)
        self.on_log("pause requested (takes effect at the branch's next step)" + self._live_suffix(), name)

    def resume_branch(self, name: str) -> None:
        self._update(name, paused=False)
        self.on_log("resume requested" + self._live_suffix(), name)

    def toggle_pause(self, name: str) -> bool:
        paused = not read_branch_config(self.layout.branch(name), self.default_max_iter).paused
        (self.pause_branch if paused else self.resume_branch)(name)
        return paused

    def pause_all(self) -> None:
        for name in self.layout.branch_names():
            if self._status(name) not in TERMINAL_BRANCH:
                self._update(name, paused=True)
        self.on_log("pause requested for every branch" + self._live_suffix(), None)

    def resume_all(self) -> None:
        for name in self.layout.branch_names():
            self._update(name, paused=False)
        self.on_log("resume requested for every branch" + self._live_suffix(), None)

    def kill_branch(self, name: str) -> None:
        self._update(name, killed=True)
        self.on_log("kill requested (the branch stops at its next step)" + self._live_suffix(), name)

    def change_max_iter(self, name: str, delta: int) -> int:
        cfg = read_branch_config(self.layout.branch(name), self.default_max_iter)
        new = max(1, cfg.max_iter + delta)
        self._update(name, max_iter=new)
        self.on_log(f"max_iter set to {new}", name)
        return new

    def retry_branch(self, name: str) -> None:
        """A finished branch acts again on a 'retry' decision (the run's steering starts it)."""
        status = self._status(name)
        if status not in TERMINAL_BRANCH or status == "killed":
            self.on_log("retry applies to a branch that has finished (done, stopped or failed)", name)
            return
        self.on_log(self._queued(queue_decision(self.layout, name, "retry", default_max_iter=self.default_max_iter,
                                                source="app").line), name)  # fmt: skip

    def _queued(self, line: str) -> str:
        return line + self._live_suffix()

    def send_message(self, name: str, text: str) -> str:
        return self._queued(queue_message(self.layout, name, text, source="app").line)

    def revert_branch(self, name: str, iteration: int) -> str:
        queued = queue_revert(self.layout, name, iteration, default_max_iter=self.default_max_iter, source="app")
        return self._queued(queued.line)

    def change_decision(self, name: str, action: str) -> str:
        queued = queue_decision(self.layout, name, action, default_max_iter=self.default_max_iter, source="app")
        return self._queued(queued.line)

    def delete_branch(self, name: str) -> str:
        return self._queued(queue_delete(self.layout, name, source="app").line)

    def is_running(self) -> bool:
        return live_run(self.layout.problem_dir) is not None

    def holder_pid(self) -> int | None:
        live = live_run(self.layout.problem_dir)
        return live.holder.pid if live is not None and live.verified else None

    async def stop(self) -> None:
        """SIGTERM to the run's process: a clean stop; --resume continues it."""
        pid = stop_run(self.layout.problem_dir)
        if pid is not None:
            self.signalled = pid
            self.on_log(f"asked the run (pid {pid}) to stop cleanly (SIGTERM)", None)


def stop_run(problem_dir: Path) -> int | None:
    """SIGTERM to the process holding the directory's run lock; its pid, or None when no run
    is live. Raises SteeringError (one line) when it cannot be signalled from here."""
    live = live_run(problem_dir)
    if live is None:
        return None
    if not live.here:
        raise SteeringError(f"the run is on {live.holder.host}; stop it there")
    if not live.verified or not holds_lock(live.holder.pid, lock_path(problem_dir)):  # checked again, just before
        raise SteeringError(
            f"the run lock is held, but not by pid {live.holder.pid} that its note names; nothing was signalled"
        )
    try:
        os.kill(live.holder.pid, signal.SIGTERM)
    except ProcessLookupError:
        return None
    except PermissionError:
        raise SteeringError(f"not allowed to signal pid {live.holder.pid}") from None
    return live.holder.pid
