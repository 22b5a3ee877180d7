"""A branch's steering inbox: ``branches/<b>/inbox/<id>.json``, one ControlCommand per file.

The UI and the CLI each write a command once, atomically, under a fresh name; nothing ever
rewrites or deletes it, so two writers (the app, a ``cacao --branch`` in another terminal)
never race. The worker reads the inbox at every step boundary and applies the commands in
name order (the name starts with the time in nanoseconds), recording each applied id in
branch.json in the same write as the command's effect: after a SIGKILL at any point a
command is either applied once or still pending.

Bounds (docs/SECURITY.md, "Steering"): a command file is a regular file (no link, FIFO or
device) of at most MAX_COMMAND_BYTES, named ``<ns time>-<pid>-<hex>.json`` (any other name is
ignored, so no name from the directory reaches a log line unchecked); at most MAX_PENDING
commands wait at once and MAX_COMMANDS are ever queued per branch (each applied id stays in
branch.json, each message in its prompts' history): past either, queuing is refused in one
line and nothing is written.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from cacao_tui.store.atomic import StateFileError, read_model, write_model
from cacao_tui.store.layout import BranchLayout
from cacao_tui.store.state import BranchManifest, ControlCommand
from ktt.capped_read import read_bytes_capped

INBOX = "inbox"
MAX_COMMAND_BYTES = 64 * 1024  # a command is small (a message: at most 4,000 characters); a bigger file is not ours
MAX_PENDING = 100  # commands waiting at once (queued, not applied yet); also what one call reads
MAX_COMMANDS = 1000  # commands ever queued on one branch (applied and pending)
_ID = re.compile(r"^\d{20}-\d{1,10}-[0-9a-f]{6}\Z")


def inbox_dir(branch: BranchLayout) -> Path:
    return branch.root / INBOX


def new_command_id() -> str:
    """Sorts by creation time; unique across processes (pid) and within one (random part)."""
    return f"{time.time_ns():020d}-{os.getpid()}-{secrets.token_hex(3)}"


class InboxFull(OSError):
    """Queuing refused: too many commands wait, or the branch had its share. ``str()`` is one line."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.EDQUOT, message)

    def __str__(self) -> str:
        return str(self.strerror)


def _applied(branch: BranchLayout) -> list[str]:
    try:
        return read_model(branch.manifest, BranchManifest).applied
    except (StateFileError, OSError):
        return []


def queue_command(branch: BranchLayout, command: ControlCommand) -> Path:
    """Write one command into the branch's inbox (atomically, under its own name).

    Raises InboxFull (an OSError) when MAX_PENDING commands already wait or the branch has
    had MAX_COMMANDS, and an OSError when inbox/ is not a plain directory of the branch.
    """
    if not _ID.match(command.id):
        raise ValueError(f"not a command id: {command.id!r}")
    folder = inbox_dir(branch)
    if folder.is_symlink():
        raise OSError(errno.ELOOP, "inbox/ is a symbolic link; not written through it", str(folder))
    applied = _applied(branch)
    waiting = len(_pending_names(folder, set(applied)))
    if waiting >= MAX_PENDING:
        raise InboxFull(
            f"{waiting} commands already wait for branch {branch.name} (at most {MAX_PENDING}); "
            "it applies them at its next step: try again then"
        )
    if len(applied) + waiting >= MAX_COMMANDS:
        raise InboxFull(f"branch {branch.name} has had {MAX_COMMANDS} steering commands, the most one branch takes")
    path = folder / f"{command.id}.json"
    write_model(path, command)
    return path


def _pending_names(folder: Path, done: set[str]) -> list[str]:
    """File names of commands not applied yet, oldest first (foreign names and temp files left out)."""
    try:
        names = sorted(p.name for p in folder.iterdir() if p.name.endswith(".json"))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [n for n in names if _ID.match(n[: -len(".json")]) and n[: -len(".json")] not in done]


@dataclass
class Inbox:
    """The pending commands of a branch, and the files that could not be read as one."""

    commands: list[ControlCommand] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)


def pending_commands(branch: BranchLayout, applied: Collection[str]) -> Inbox:
    """Commands not applied yet, oldest first. Temp files and foreign names are ignored."""
    inbox = Inbox()
    folder = inbox_dir(branch)
    if folder.is_symlink():
        return inbox
    for name in _pending_names(folder, set(applied))[:MAX_PENDING]:
        cid = name[: -len(".json")]
        path = folder / name
        try:
            # A regular file, not followed if a link, at most MAX_COMMAND_BYTES: a FIFO or a
            # link to /dev/zero is reported as unreadable, never read.
            command = ControlCommand.model_validate_json(read_bytes_capped(path, MAX_COMMAND_BYTES, follow_links=False))
        except (OSError, ValueError, ValidationError):
            inbox.unreadable.append(name)
            continue
        if command.id != cid:
            inbox.unreadable.append(name)
            continue
        inbox.commands.append(command)
    return inbox


def has_pending(branch: BranchLayout, applied: Collection[str]) -> bool:
    """Cheap check (names only) used by the engine's watcher."""
    folder = inbox_dir(branch)
    try:
        done = set(applied)
        return any(
            p.name.endswith(".json") and _ID.match(p.name[:-5]) and p.name[:-5] not in done for p in folder.iterdir()
        )
    except (FileNotFoundError, NotADirectoryError):
        return False
