"""What every step needs: the problem, the run's files, the LLM, the tuner, the event bus.

The engine builds one ``RunDeps`` per run and one ``BranchView`` per branch step; nodes
read them and return work products. Nodes never write branch.json (the worker does);
they write only the files of their own iteration directory, and report through a
``Reporter`` (nodes sit below the engine, so they never import its event classes).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from cacao_tui.ktt_client import Tuner
from cacao_tui.llm import TrackedLLM
from cacao_tui.settings import Defaults
from cacao_tui.store.layout import BranchLayout, IterLayout, RunLayout
from cacao_tui.store.state import BestResult, GpuInfo, RunSettings, Strategy
from ktt.problem import Problem
from ktt.protocol import Progress


class Reporter(Protocol):
    """How a step reports while it works; the engine turns these into events."""

    def log(self, message: str, level: str = "info") -> None: ...
    def tuning_progress(self, progress: Progress) -> None: ...
    def kernel_written(self, kernel: Path, spec: Path | None) -> None: ...


class DeviceLease(Protocol):
    """Hands out one GPU at a time per device (the engine's scheduler implements it)."""

    def acquire(self) -> contextlib.AbstractAsyncContextManager[int]: ...


class NoDevices:
    """For --dry-run: there is no GPU to lease, and nothing may ask for one."""

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[int]:
        raise RuntimeError("no GPU is used in a dry run")
        yield 0  # pragma: no cover


@dataclass
class RunDeps:
    problem: Problem
    layout: RunLayout
    llm: TrackedLLM
    tuner: Tuner
    settings: RunSettings
    defaults: Defaults
    gpu: GpuInfo
    devices: DeviceLease
    analysis: str | None = None
    _brief: str | None = field(default=None, repr=False)


@dataclass
class BranchView:
    """A read-only picture of the branch a step works for."""

    name: str
    title: str
    strategy: Strategy
    depth: int
    parent: str | None
    layout: BranchLayout
    reporter: Reporter
    iteration: int
    iterations_done: int
    max_iter: int
    best: BestResult | None
    base_kernel: str | None = None  # source the iteration starts from (best so far, or the parent's)
    base_spec: str | None = None
    base_label: str | None = None  # where the base came from, for prompts

    @property
    def it(self) -> IterLayout:
        return self.layout.iteration(self.iteration)
