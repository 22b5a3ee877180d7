"""A branch worker's side of steering: the inbox's commands (message, revert, changed
decision) applied at step boundaries, and pause and kill honoured there.

Each applied command's id lands in branch.json in the same write as its effect, so a command
counts exactly once (engine/steering.py is the engine's side: watching inboxes, deletes).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from cacao_tui.engine.control import revert_problem
from cacao_tui.engine.events import IterationStatusChanged
from cacao_tui.engine.worker_core import PAUSE_POLL_S, BranchKilled, BranchRedirected, WorkerCore
from cacao_tui.store.inbox import inbox_dir, pending_commands
from cacao_tui.store.state import (
    TERMINAL_BRANCH,
    BranchConfig,
    BranchManifest,
    ControlCommand,
    DecisionOverride,
    UserMessage,
)


class SteerCommands(WorkerCore):
    """Pause, kill and the inbox's commands, applied between steps."""

    # -- control -----------------------------------------------------------------------------

    async def honour_control(self, m: BranchManifest) -> BranchConfig:
        """Apply the inbox, wait while paused; raise BranchKilled when a kill was asked for and
        BranchRedirected when a revert abandoned the iteration in progress. A stopping run
        cancels the worker here: a cancellation that raced with a finishing step (and was lost
        with it) still ends the branch before its next step."""
        if self.host.stopping:
            raise asyncio.CancelledError()
        self.apply_commands()
        cfg = self.config()
        paused_here = False
        while cfg.paused and not cfg.killed and not self.kill_requested:
            if not paused_here:
                self.set_status(self.manifest(), "paused")
                paused_here = True
            self.wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), PAUSE_POLL_S)
            self.apply_commands()
            cfg = self.config()
        if cfg.killed or self.kill_requested:
            raise BranchKilled()
        if paused_here or self.files.peek_manifest().status != "running":
            self.set_status(self.manifest(), "running")
        return cfg

    # -- steering (the inbox) --------------------------------------------------------------

    def apply_commands(self) -> bool:
        """Apply the pending message, revert and decision commands (deletes are the engine's).

        Every effect lands in one branch.json write together with the applied ids; the only
        other file written (a finished branch's last decision, rewritten by a decision
        override) is written first and carries the command id, so a replay after a crash
        finds it done. Returns True when the branch was reopened or redirected; raises
        BranchRedirected when a revert abandoned an iteration in progress.
        """
        if not inbox_dir(self.layout).is_dir():  # the usual case: never steered
            return False
        m = self.manifest()
        inbox = pending_commands(self.layout, m.applied)
        commands = [c for c in inbox.commands if c.kind != "delete"]
        if not commands and not inbox.unreadable:
            return False
        events: list[Callable[[], None]] = []
        redirected = reopened = False
        for name in inbox.unreadable:
            m.applied.append(name.removesuffix(".json"))
            note = f"inbox/{name}: not a control command; ignored"
            events.append(lambda note=note: self.reporter.log(note, "warning"))
        for command in commands:
            m.applied.append(command.id)
            if command.kind == "message":
                self._apply_message(m, command, events)
            elif command.kind == "revert":
                r = self._apply_revert(m, command, events)
                redirected |= r == "redirected"
                reopened |= r == "reopened"
            elif command.kind == "decision":
                reopened |= self._apply_decision(m, command, events)
        if reopened and m.status in TERMINAL_BRANCH:
            m.status = "running"  # in the same write as the applied ids: a crash cannot lose the reopening
            m.stop_reason = None
            events.append(lambda: self._announce_status(m))
        self.save(m)
        for emit in events:
            emit()
        if redirected:
            raise BranchRedirected()
        return reopened

    def _apply_message(self, m: BranchManifest, c: ControlCommand, events: list[Callable[[], None]]) -> None:
        text = (c.text or "").strip()
        at = m.current_iteration if m.current_iteration is not None else self.next_index(m)
        m.messages.append(UserMessage(id=c.id, text=text, at=c.created_at, iteration=at))
        m.steer_seq += 1
        short = " ".join(text.split())
        short = short if len(short) <= 160 else short[:157] + "..."
        events.append(lambda: self.reporter.log(f"message from the user: {short}"))

    def _apply_revert(self, m: BranchManifest, c: ControlCommand, events: list[Callable[[], None]]) -> str:
        target = c.iteration or 0
        problem = revert_problem(self.layout, m, target)
        if problem is not None:
            events.append(lambda: self.reporter.log(f"revert to iteration {target} refused: {problem}", "warning"))
            return ""
        in_progress = m.current_iteration is not None
        later = {i for i in self.files.indices() if i > target}
        if m.current_iteration is not None and m.current_iteration > target:
            later.add(m.current_iteration)
        new = sorted(later - set(m.superseded))
        m.superseded = sorted(set(m.superseded) | later)
        m.base_iteration = target
        m.current_iteration = None
        m.steer_seq += 1
        m.iterations_done = self.count_done(m)
        was_finished = m.status in TERMINAL_BRANCH
        if was_finished:
            m.stop_reason = None
            m.error = None

        def announce() -> None:
            for i in new:
                self.host.bus.emit(IterationStatusChanged(branch=self.name, iteration=i, status="superseded"))
            kept = f"; iterations {', '.join(map(str, new))} are superseded (kept on disk)" if new else ""
            self.reporter.log(f"reverted to iteration {target}: the next iteration starts from its kernel{kept}")

        events.append(announce)
        if in_progress:
            return "redirected"
        return "reopened" if was_finished else ""

    def _apply_decision(self, m: BranchManifest, c: ControlCommand, events: list[Callable[[], None]]) -> bool:
        action = c.action or "continue"
        if m.status not in TERMINAL_BRANCH or m.current_iteration is not None:
            m.pending_decision = DecisionOverride(id=c.id, action=action, at=c.created_at)
            events.append(lambda: self.reporter.log(f"the user chose '{action}' for this branch's next decision"))
            return False
        # A finished branch: change its last decision and act on it again.
        last = self.last_decided(m)
        if last is None or last.decision is None:
            m.pending_decision = DecisionOverride(id=c.id, action=action, at=c.created_at)
            return False
        d = last.decision
        if d.override_id != c.id:
            if action == d.action:
                events.append(lambda: self.reporter.log(f"the last decision already is '{action}'"))
                return False
            if action == "branch" and not d.sub_strategies:
                events.append(
                    lambda: self.reporter.log(
                        "cannot change the last decision to 'branch': it named no sub-strategies", "warning"
                    )
                )
                return False
            last.decision = d.model_copy(
                update={
                    "action": action,
                    "overridden_from": d.overridden_from or d.action,
                    "override_id": c.id,
                    "reason": f"changed by the user to {action} (was {d.action}: {d.reason})",
                }
            )
            self.save_state(last)
        m.current_iteration = last.index  # the loop applies the changed decision again
        m.stop_reason = None
        note = f"the user changed the decision of iteration {last.index}: {d.action} -> {action}"
        events.append(lambda: self.reporter.log(note))
        events.append(lambda: self.emit_decision(last))
        return True
