"""What a front end may ask of a running engine, and the branch_config.json writer.

The UI never touches a worker's files. It changes a branch through these methods, which
write branch_config.json (the UI-owned file) atomically and wake the worker, which only
reads it.
"""

from __future__ import annotations

from typing import Protocol

from cacao_tui.store.atomic import read_model_or_none, write_model
from cacao_tui.store.layout import BranchLayout, RunLayout
from cacao_tui.store.state import BranchConfig


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
    def is_running(self) -> bool: ...
    async def stop(self) -> None: ...  # stop cleanly: kill nothing half-written, keep --resume possible


def read_branch_config(branch: BranchLayout, default_max_iter: int) -> BranchConfig:
    cfg = read_model_or_none(branch.config, BranchConfig)
    return cfg if cfg is not None else BranchConfig(max_iter=default_max_iter)


def update_branch_config(branch: BranchLayout, default_max_iter: int, **changes: object) -> BranchConfig:
    """Read-modify-write of branch_config.json (the UI/CLI is its only writer)."""
    cfg = read_branch_config(branch, default_max_iter)
    new = cfg.model_copy(update=changes)
    write_model(branch.config, new)
    return new
