"""What a front end may ask of a running engine, and the writers of the user's files.

The UI and the CLI never touch a worker's files. They change a branch through
branch_config.json (max_iter, pause, kill, retry: read-modify-write under a lock, since the
app and a ``cacao --branch`` in another terminal may both write it) and steer it through
its inbox (a message, a revert, a changed decision, a delete: one new file per command).
The worker only reads both. Steering works while a run is live and between runs: it
never takes the run's lock; a live run applies a command at the branch's next step, a
later ``--resume`` applies what is still pending.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cacao_tui.store.atomic import StateFileError, read_model, read_model_or_none, write_model
from cacao_tui.store.inbox import new_command_id, queue_command
from cacao_tui.store.layout import BRANCH_NAME, BranchLayout, RunLayout
from cacao_tui.store.state import (
    ACTIONS,
    MAX_MESSAGE_CHARS,
    TERMINAL_BRANCH,
    Action,
    BranchConfig,
    BranchManifest,
    ControlCommand,
    Decision,
    IterState,
)


class EngineControl(Protocol):
    """The control surface the Textual app (and tests' scripted engines) use."""

    layout: RunLayout

    def pause_branch(self, name: str) -> None: ...
    def resume_branch(self, name: str) -> None: ...
    def toggle_pause(self, name: str) -> bool: ...  # returns the new paused state
    def pause_all(self) -> None: ...
    def resume_all(self) -> None: ...
    def kill_branch(self, name: str) -> None: ...
    def change_max_iter(self, name: str, delta: int) -> int: ...  # returns the new max_iter
    def retry_branch(self, name: str) -> None: ...
    # Steering; each returns a line to show, or raises SteeringError (one line) when refused.
    def send_message(self, name: str, text: str) -> str: ...
    def revert_branch(self, name: str, iteration: int) -> str: ...
    def change_decision(self, name: str, action: str) -> str: ...
    def delete_branch(self, name: str) -> str: ...
    def is_running(self) -> bool: ...
    async def stop(self) -> None: ...  # stop cleanly: kill nothing half-written, keep --resume possible


class SteeringError(Exception):
    """A steering request that cannot be queued; ``str()`` is the one line to show."""


# -- branch_config.json -------------------------------------------------------------------------
def read_branch_config(branch: BranchLayout, default_max_iter: int) -> BranchConfig:
    cfg = read_model_or_none(branch.config, BranchConfig)
    return cfg if cfg is not None else BranchConfig(max_iter=default_max_iter)


@contextlib.contextmanager
def _config_lock(branch: BranchLayout) -> Iterator[None]:
    """Serialise read-modify-writes of branch_config.json between the app and CLI processes."""
    branch.root.mkdir(parents=True, exist_ok=True)
    path = branch.root / ".branch_config.lock"
    try:  # never through a link (it would create a file where it points), never blocking on a FIFO
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise SteeringError(f"{path}: cannot lock ({exc.strerror}); remove it if it is not a plain file") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def update_branch_config(branch: BranchLayout, default_max_iter: int, **changes: object) -> BranchConfig:
    """Read-modify-write of branch_config.json (the UI/CLI is its only writer)."""
    with _config_lock(branch):
        cfg = read_branch_config(branch, default_max_iter)
        new = cfg.model_copy(update=changes)
        write_model(branch.config, new)
        return new


# -- steering -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Queued:
    branch: str
    command: ControlCommand
    line: str  # what to tell the user


def branch_of(layout: RunLayout, name: str) -> tuple[BranchLayout, BranchManifest]:
    """The named branch of the run, or SteeringError naming the ones there are."""
    names = layout.branch_names()
    if not isinstance(name, str) or len(name) > 200 or not BRANCH_NAME.match(name) or name not in names:
        shown = name[:80] if isinstance(name, str) else repr(name)
        listed = ", ".join(names) if names else "none: the run has not created any yet"
        raise SteeringError(f"{layout.output}: no branch named {shown!r} (branches: {listed})")
    branch = layout.branch(name)
    try:
        return branch, read_model(branch.manifest, BranchManifest)
    except StateFileError as exc:
        raise SteeringError(str(exc)) from None


def clean_message(text: str) -> str:
    """A message as it will reach prompts: control characters other than newlines and tabs removed."""
    kept = "".join(ch for ch in text if ch in "\n\t" or unicodedata.category(ch)[0] != "C")
    kept = kept.strip()
    if not kept:
        raise SteeringError("the message is empty")
    if len(kept) > MAX_MESSAGE_CHARS:
        raise SteeringError(f"the message is {len(kept):,} characters; at most {MAX_MESSAGE_CHARS:,}")
    return kept


def revert_problem(branch: BranchLayout, m: BranchManifest, target: int) -> str | None:
    """Why the branch cannot continue from iteration ``target``'s kernel (None: it can)."""
    decided = []
    for i in branch.iteration_indices():
        if not m.live(i):
            continue
        with contextlib.suppress(StateFileError):
            st = read_model_or_none(branch.iteration(i).state, IterState)
            if st is not None and st.decision is not None and st.author is not None and st.author.ok:
                decided.append(i)
    choices = ", ".join(map(str, decided)) if decided else "none yet"
    if target in m.superseded:
        return f"iteration {target} was superseded by an earlier revert (iterations to revert to: {choices})"
    if target not in decided or not branch.iteration(target).kernel.is_file():
        return f"iteration {target} has no decided kernel on this branch (iterations to revert to: {choices})"
    return None


def _queue(branch: BranchLayout, command: ControlCommand, line: str) -> Queued:
    try:
        queue_command(branch, command)
    except OSError as exc:
        raise SteeringError(f"{branch.root / 'inbox'}: cannot write ({exc.strerror or exc})") from None
    return Queued(branch.name, command, line)


def _reopen_budget(branch: BranchLayout, m: BranchManifest, default_max_iter: int, more: int) -> str:
    """Let a branch that is finished, or at its iteration budget, run ``more`` iterations."""
    cfg = read_branch_config(branch, default_max_iter)
    changes: dict[str, object] = {}
    if cfg.killed:
        changes["killed"] = False
    if cfg.max_iter < m.iterations_done + more:
        changes["max_iter"] = m.iterations_done + more
    if changes:
        update_branch_config(branch, default_max_iter, **changes)
    if "max_iter" in changes:
        return f"; max_iter raised to {changes['max_iter']}"
    return ""


def queue_message(layout: RunLayout, name: str, text: str, *, source: str = "cli") -> Queued:
    branch, m = branch_of(layout, name)
    command = ControlCommand(id=new_command_id(), kind="message", text=clean_message(text), source=source)
    after = "its next prompts" if m.status not in TERMINAL_BRANCH else "its prompts if it runs again"
    return _queue(branch, command, f"{name}: message queued; it reaches {after}")


def queue_revert(
    layout: RunLayout, name: str, iteration: int, *, default_max_iter: int, source: str = "cli"
) -> Queued:
    branch, m = branch_of(layout, name)
    problem = revert_problem(branch, m, iteration)
    if problem is not None:
        raise SteeringError(f"{name}: cannot revert: {problem}")
    command = ControlCommand(id=new_command_id(), kind="revert", iteration=iteration, source=source)
    # After the revert the branch has used ``iteration`` of its budget; let it run at least once more.
    extra = _reopen_budget(branch, m.model_copy(update={"iterations_done": iteration}), default_max_iter, 1)
    later = [i for i in branch.iteration_indices() if i > iteration and m.live(i)]
    kept = f"; iterations {', '.join(map(str, later))} will be kept on disk, marked superseded" if later else ""
    return _queue(branch, command, f"{name}: revert to iteration {iteration} queued{kept}{extra}")


def queue_decision(
    layout: RunLayout, name: str, action: str, *, default_max_iter: int, source: str = "cli"
) -> Queued:
    if action not in ACTIONS:
        raise SteeringError(f"unknown decision {action!r}; choose one of {', '.join(ACTIONS)}")
    branch, m = branch_of(layout, name)
    finished = m.status in TERMINAL_BRANCH and m.current_iteration is None
    extra = ""
    if action == "branch" and finished:
        last = _last_decision(branch, m)
        if last is None or not last.sub_strategies:
            raise SteeringError(
                f"{name}: cannot change its last decision to branch: that decision named no sub-strategies "
                "(send a message describing them, then --decision continue)"
            )
    if action != "stop":
        # Finished: the changed decision needs one more iteration; running: the iteration after
        # the next decision must fit in the budget.
        extra = _reopen_budget(branch, m, default_max_iter, 1 if finished else 2)
    typed: Action = action  # type: ignore[assignment]
    command = ControlCommand(id=new_command_id(), kind="decision", action=typed, source=source)
    when = "replaces its last decision" if finished else "is used for its next decision"
    return _queue(branch, command, f"{name}: decision '{action}' queued; it {when}{extra}")


def descendants(layout: RunLayout, name: str) -> list[str]:
    """The branches grown from ``name`` (children, their children, ...), from the manifests."""
    parents: dict[str, str | None] = {}
    for other in layout.branch_names():
        with contextlib.suppress(StateFileError, OSError):
            parents[other] = read_model(layout.branch(other).manifest, BranchManifest).parent
    found: list[str] = []
    frontier = [name]
    while frontier:
        current = frontier.pop()
        kids = sorted(n for n, p in parents.items() if p == current and n not in found)
        found += kids
        frontier += kids
    return found


def queue_delete(layout: RunLayout, name: str, *, source: str = "cli") -> Queued:
    branch, _ = branch_of(layout, name)
    below = descendants(layout, name)
    command = ControlCommand(id=new_command_id(), kind="delete", source=source)
    also = f" with its sub-branches {', '.join(below)}" if below else ""
    return _queue(branch, command, f"{name}: delete queued; the branch{also} moves to output/trash/")


def _last_decision(branch: BranchLayout, m: BranchManifest) -> Decision | None:
    for i in reversed(branch.iteration_indices()):
        if m.live(i):
            with contextlib.suppress(StateFileError):
                st = read_model_or_none(branch.iteration(i).state, IterState)
                if st is not None and st.decision is not None:
                    return st.decision
    return None


def trash_dir(layout: RunLayout) -> Path:
    """Deleted branches go here (output/trash/<name>); a name there is never created again."""
    return layout.output / "trash"


def trash_branches(layout: RunLayout, names: list[str]) -> list[tuple[str, Path]]:
    """Move the branches' directories into the trash, one rename each (a branch is either here
    or there; nothing is lost): [(name, where it went)]. The caller has stopped their workers."""
    trash = trash_dir(layout)
    trash.mkdir(parents=True, exist_ok=True)
    moved = []
    for name in names:
        source = layout.branch(name).root
        if not source.is_dir():
            continue
        target = trash / name
        k = 2
        while target.exists():
            target = trash / f"{name}.{k}"
            k += 1
        os.replace(source, target)
        moved.append((name, target))
    return moved
