"""The worker's host interface and the engine's file traffic.

A branch worker needs only ``WorkerHost`` (a test host that is no Engine runs one to the
end), and the engine reads back none of the branch.json or state.json files it wrote
during a run (engine/branch_files.py): before issue 11's changes were tuned, every step
boundary and every prompt re-read them (engine overhead 31.9 ms per iteration on the H200).
"""

from __future__ import annotations

import asyncio
import builtins
import io
import pathlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cacao_tui.engine.branch_files import BranchFiles, RunFiles
from cacao_tui.engine.events import DecisionMade, EventBus, NewBest, RunFinished
from cacao_tui.engine.pool import NoPool
from cacao_tui.engine.worker import BranchWorker, WorkerHost
from cacao_tui.nodes.context import RunDeps
from cacao_tui.store.atomic import read_model, write_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import BestResult, BranchConfig, BranchManifest, IterState, Strategy
from tests.engine.conftest import make_engine
from tests.engine.scenario import Scenario


@dataclass
class TestHost:
    """A WorkerHost that is not an Engine: it records what the worker asked of it."""

    __test__ = False

    deps: RunDeps
    bus: EventBus
    slots: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(1))
    bests: list[BestResult] = field(default_factory=list)
    spawned: list[str] = field(default_factory=list)
    budget_reached: bool = False
    stopping: bool = False
    budget: NoPool = field(default_factory=NoPool)  # no run-level iteration pool: each branch its max_iter

    def __post_init__(self) -> None:
        self.files = RunFiles(self.deps.layout)

    def branch_files(self, name: str) -> BranchFiles:
        return self.files.branch(name)

    def can_branch(self, m: BranchManifest, upcoming: int = 1) -> tuple[bool, str]:
        return False, ": this host grows no sub-branches"

    def create_children(self, parent: BranchManifest, iteration: int, subs: list[Strategy]) -> list[str]:
        raise AssertionError("no children: can_branch said no")

    def spawn(self, name: str) -> None:
        self.spawned.append(name)

    def offer_best(self, candidate: BestResult) -> bool:
        self.bests.append(candidate)
        return True

    def note_budget_reached(self) -> None:
        self.budget_reached = True


def test_a_worker_runs_a_branch_with_only_its_host_interface(mmul_dir: Path) -> None:
    scenario = Scenario(strategies=["alpha"])
    bus = EventBus()
    events: list = []
    bus.subscribe(events.append)
    deps = make_engine(mmul_dir, scenario.provider(), bus=bus, max_iter=2).deps  # the run's deps; no engine runs
    host = TestHost(deps=deps, bus=bus)
    assert isinstance(host, WorkerHost) and isinstance(make_engine(mmul_dir, scenario.provider()), WorkerHost)
    b = deps.layout.branch("b1-alpha")
    b.root.mkdir(parents=True)
    write_model(b.config, BranchConfig(max_iter=2))
    strategy = Strategy(name="alpha", title="Strategy alpha", description="do alpha")
    host.files.created("b1-alpha", BranchManifest(name="b1-alpha", title=strategy.title, strategy=strategy))

    asyncio.run(BranchWorker(host, "b1-alpha").run())

    m = read_model(b.manifest, BranchManifest)
    assert m.status == "done" and m.iterations_done == 2
    assert m.best is not None and m.best.iteration == 2
    assert [c.iteration for c in host.bests] == [1, 2]
    assert [e.iteration for e in events if isinstance(e, DecisionMade)] == [1, 2]
    assert [e.iteration for e in events if isinstance(e, NewBest)] == [1, 2]
    assert read_model(b.iteration(2).state, IterState).decision is not None
    # What the worker keeps in memory is what is on disk.
    assert host.files.branch("b1-alpha").manifest() == m


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts every file opened for reading, by name (builtins.open, io.open, Path.read_*)."""
    reads: Counter[str] = Counter()
    real_open = builtins.open

    def counting_open(file, mode="r", *args, **kwargs):  # type: ignore[no-untyped-def]
        if isinstance(file, str | pathlib.PurePath) and not any(c in mode for c in "wax+"):
            reads[pathlib.Path(file).name] += 1
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting_open)
    monkeypatch.setattr(io, "open", counting_open)
    return reads


def test_the_engine_reads_back_no_state_file_it_wrote(mmul_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Four branches of three iterations: branch.json and state.json are read only by the
    final results (once each, from disk, as --best does), never at a step boundary or for a prompt."""
    scenario = Scenario(strategies=["alpha", "beta", "gamma", "delta"])
    bus = EventBus()
    finished: list[RunFinished] = []
    engine = make_engine(mmul_dir, scenario.provider(), bus=bus, max_iter=3, n_strategies=4, concurrency=4)
    reads = _count_reads(monkeypatch)
    at_finish: Counter[str] = Counter()
    # write_final_results runs just before RunFinished: take the counts before it.
    real_finish = engine.finish

    def finish(status: str, message: str | None) -> RunFinished:
        at_finish.update(reads)
        return real_finish(status, message)

    monkeypatch.setattr(engine, "finish", finish)
    bus.subscribe(lambda e: finished.append(e) if isinstance(e, RunFinished) else None)
    asyncio.run(engine.run())
    assert finished and finished[0].status == "ok"
    layout = RunLayout(mmul_dir)
    assert len(layout.branch_names()) == 4
    assert at_finish["branch.json"] == 0, at_finish
    assert at_finish["state.json"] == 0, at_finish
    # branch_config.json is the user's (the app or the CLI may change it at any time), so it is
    # read at every step boundary: six per iteration, and one per status change.
    assert at_finish["branch_config.json"] <= 4 * 3 * 8, at_finish
    # The other reads are the tuner's output and the kernels a step starts from, once each.
    assert at_finish["kernels.cu"] <= 4 * 3 * 2, at_finish
