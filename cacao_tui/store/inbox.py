"""A branch's steering inbox: ``branches/<b>/inbox/<id>.json``, one ControlCommand per file.

The UI and the CLI each write a command once, atomically, under a fresh name; nothing ever
rewrites or deletes it, so two writers (the app, a ``cacao --branch`` in another terminal)
never race. The worker reads the inbox at every step boundary and applies the commands in
name order (the name starts with the time in nanoseconds), recording each applied id in
branch.json in the same write as the command's effect: after a SIGKILL at any point a
command is either applied once or still pending.
"""

from __future__ import annotations

import os
import re
import secrets
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from cacao_tui.store.atomic import write_model
from cacao_tui.store.layout import BranchLayout
from cacao_tui.store.state import ControlCommand

INBOX = "inbox"
MAX_COMMAND_BYTES = 64 * 1024  # a command is small; a bigger file is not one of ours
MAX_PENDING = 500  # commands read per call; the rest wait for the next boundary
_ID = re.compile(r"^\d{20}-\d{1,10}-[0-9a-f]{6}$")


def inbox_dir(branch: BranchLayout) -> Path:
    return branch.root / INBOX


def new_command_id() -> str:
    """Sorts by creation time; unique across processes (pid) and within one (random part)."""
    return f"{time.time_ns():020d}-{os.getpid()}-{secrets.token_hex(3)}"


def queue_command(branch: BranchLayout, command: ControlCommand) -> Path:
    """Write one command into the branch's inbox (atomically, under its own name)."""
    if not _ID.match(command.id):
        raise ValueError(f"not a command id: {command.id!r}")
    path = inbox_dir(branch) / f"{command.id}.json"
    write_model(path, command)
    return path


@dataclass
class Inbox:
    """The pending commands of a branch, and the files that could not be read as one."""

    commands: list[ControlCommand] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)


def pending_commands(branch: BranchLayout, applied: Collection[str]) -> Inbox:
    """Commands not applied yet, oldest first. Temp files and foreign names are ignored."""
    inbox = Inbox()
    folder = inbox_dir(branch)
    try:
        names = sorted(p.name for p in folder.iterdir() if p.name.endswith(".json"))
    except (FileNotFoundError, NotADirectoryError):
        return inbox
    done = set(applied)
    for name in names:
        cid = name[: -len(".json")]
        if not _ID.match(cid) or cid in done:
            continue
        if len(inbox.commands) >= MAX_PENDING:
            break
        path = folder / name
        try:
            if path.stat().st_size > MAX_COMMAND_BYTES:
                raise ValueError("too large")
            command = ControlCommand.model_validate_json(path.read_bytes())
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
