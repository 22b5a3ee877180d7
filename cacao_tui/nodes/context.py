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
from cacao_tui.nodes.fingerprint import TunedKernels
from cacao_tui.settings import Defaults
from cacao_tui.store.layout import BranchLayout, IterLayout, RunLayout
from cacao_tui.store.phases import Phase
from cacao_tui.store.state import (
    Action,
    BestResult,
    BranchManifest,
    GpuInfo,
    IterMode,
    IterState,
    RunSettings,
    Strategy,
    UserMessage,
)
from ktt.problem import Problem
from ktt.protocol import DeviceReport, Progress


class Reporter(Protocol):
    """How a step reports while it works; the engine turns these into events."""

    def log(self, message: str, level: str = "info") -> None: ...
    def tuning_progress(self, progress: Progress) -> None: ...
    def kernel_written(self, kernel: Path, spec: Path | None) -> None: ...


class DeviceLease(Protocol):
    """Hands out one GPU at a time per device (the engine's scheduler implements it)."""

    def acquire(self) -> contextlib.AbstractAsyncContextManager[int]: ...


class BranchDirectory(Protocol):
    """The run's branches and their manifests. The engine's implementation answers from
    memory (its process writes every branch.json), so showing the other branches in each
    prompt reads no files; ``branch_queries.DiskBranches`` reads the run directory."""

    def names(self) -> list[str]: ...
    def manifest(self, name: str) -> BranchManifest | None: ...


class NoDevices:
    """For --dry-run and the model phase (--phase llm): there is no GPU to lease, and nothing may ask for one."""

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[int]:
        raise RuntimeError("no GPU is used in a dry run or in the model phase")
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
    branches: BranchDirectory | None = None  # None: read the run directory
    analysis: str | None = None
    tuned: TunedKernels = field(default_factory=TunedKernels)  # what the run tuned, by fingerprint
    # The model of single steps (--model-plan, --model-decide); the others use ``llm``. They
    # share ``llm``'s usage totals, so the run's cost and budget count every call.
    step_llms: dict[str, TrackedLLM] = field(default_factory=dict)
    device: DeviceReport | None = None  # the device table (measured once per run; None: not known)
    phase: Phase | None = None  # --phase: this process takes only the model's or only the GPU's steps
    _brief: dict[bool, str] | None = field(default=None, repr=False)  # problem_brief's, with and without the source
    # The general notes that lift the authoring prefix to the model's cache minimum (nodes/author.py), chosen
    # once per run: a prefix that changed between authoring steps would be cached by none of them.
    _top_up: list[str] | None = field(default=None, repr=False)


def llm_for(deps: RunDeps, node: str) -> TrackedLLM:
    """The model a step uses: its own (--model-plan, --model-decide), else the run's."""
    return deps.step_llms.get(node, deps.llm)


@dataclass(frozen=True)
class SourceFiles:
    """A kernels.cu / tuning.yaml pair and where it came from (for prompts and the workspace)."""

    kernel: str | None
    spec: str | None
    label: str  # e.g. "iteration 2 of this branch"
    iteration: int | None = None  # this branch's iteration it is from (None: the parent's)


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
    run: RunLayout | None = None  # the run's output (cross-branch queries); None in narrow tests
    mode: IterMode = "first"
    plan: str | None = None  # the branch plan in force
    messages: list[UserMessage] = field(default_factory=list)
    superseded: frozenset[int] = frozenset()
    previous: IterState | None = None  # the iteration this one follows: its decision sets the task
    start: SourceFiles | None = None  # the files this iteration starts from (already in its directory)
    best_files: SourceFiles | None = None  # the branch's best, when it is not the start
    can_branch: bool = False
    branch_note: str = ""  # the branching limits, for decide and propose
    path_note: str = ""
    forced_action: Action | None = None  # the user's choice for this iteration's decision
    reverted_to: int | None = None  # set when this iteration continues a revert to that iteration
    parent_iteration: int | None = None  # the parent's iteration this branch started from
    sample: int | None = None  # one of K authoring attempts (--samples): its own directory
    # The states of the earlier iterations, read once per view (they do not change under it).
    earlier_cache: list[IterState] | None = field(default=None, repr=False)

    @property
    def it(self) -> IterLayout:
        it = self.layout.iteration(self.iteration)
        return it if self.sample is None else IterLayout(it.root / "samples" / f"s{self.sample}")

    @property
    def base_kernel(self) -> str | None:
        return self.start.kernel if self.start else None

    @property
    def base_spec(self) -> str | None:
        return self.start.spec if self.start else None
