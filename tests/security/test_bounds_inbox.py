"""Class 2 of issue 10, the steering inbox (branches/<b>/inbox/): a command file is read as a regular
file under its cap (a FIFO, a link to /dev/zero or a huge file is reported unreadable, never read);
at most MAX_PENDING commands wait at once and MAX_COMMANDS are ever queued per branch (queuing past
that is one line, nothing written); names that are not command ids are ignored."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cacao_tui.engine.control import SteeringError, _queue
from cacao_tui.store import inbox as inbox_module
from cacao_tui.store.atomic import write_model
from cacao_tui.store.inbox import (
    MAX_COMMAND_BYTES,
    MAX_PENDING,
    InboxFull,
    inbox_dir,
    new_command_id,
    pending_commands,
    queue_command,
)
from cacao_tui.store.layout import BranchLayout, RunLayout
from cacao_tui.store.state import BranchManifest, ControlCommand, Strategy

pytestmark = pytest.mark.timeout(60)


def branch_at(tmp_path: Path, applied: list[str] | None = None) -> BranchLayout:
    branch = RunLayout(tmp_path).branch("b1")
    write_model(
        branch.manifest,
        BranchManifest(
            name="b1", title="t", strategy=Strategy(name="b1", title="t", description="d"), applied=applied or []
        ),
    )
    return branch


def message(text: str = "try a larger tile") -> ControlCommand:
    return ControlCommand(id=new_command_id(), kind="message", text=text)


def test_hostile_command_files_are_unreadable_not_read(tmp_path: Path) -> None:
    branch = branch_at(tmp_path)
    good = message()
    queue_command(branch, good)
    folder = inbox_dir(branch)
    fifo, zero, big, link = (new_command_id() for _ in range(4))
    os.mkfifo(folder / f"{fifo}.json")
    (folder / f"{zero}.json").symlink_to("/dev/zero")
    (folder / f"{big}.json").write_bytes(b" " * (MAX_COMMAND_BYTES + 1))
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(message("from outside the inbox").model_copy(update={"id": link}).model_dump_json())
    (folder / f"{link}.json").symlink_to(elsewhere)
    (folder / "\x1b[2J.json").write_text("{}")  # a foreign name: ignored, never logged
    inbox = pending_commands(branch, [])
    assert [c.id for c in inbox.commands] == [good.id]
    assert sorted(inbox.unreadable) == sorted(f"{i}.json" for i in (fifo, zero, big, link))


def test_pending_commands_are_capped(tmp_path: Path) -> None:
    branch = branch_at(tmp_path)
    for _ in range(MAX_PENDING):
        queue_command(branch, message())
    assert len(pending_commands(branch, []).commands) == MAX_PENDING
    before = sorted(os.listdir(inbox_dir(branch)))
    with pytest.raises(InboxFull, match=f"already wait for branch b1 \\(at most {MAX_PENDING}\\)") as info:
        queue_command(branch, message())
    assert "\n" not in str(info.value)
    assert sorted(os.listdir(inbox_dir(branch))) == before  # nothing written
    # through the engine's control (the app and cacao --branch): one SteeringError line
    with pytest.raises(SteeringError, match="at most 100"):
        _queue(branch, message(), "queued")


def test_commands_per_branch_are_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inbox_module, "MAX_COMMANDS", 50)
    branch = branch_at(tmp_path, applied=[new_command_id() for _ in range(49)])
    queue_command(branch, message())  # the 50th
    with pytest.raises(InboxFull, match="has had 50 steering commands"):
        queue_command(branch, message())


def test_an_inbox_that_is_a_link_is_not_written_through(tmp_path: Path) -> None:
    branch = branch_at(tmp_path)
    target = tmp_path / "elsewhere"
    target.mkdir()
    inbox_dir(branch).symlink_to(target)
    with pytest.raises(OSError, match="symbolic link"):
        queue_command(branch, message())
    assert not os.listdir(target)
    (target / f"{new_command_id()}.json").write_text(message().model_dump_json())
    assert pending_commands(branch, []).commands == []
