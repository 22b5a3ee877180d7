"""The compile queue in the order the search wants: urgency, re-ranking and withdrawal (CPU, no GPU).

Two levels, both with FAKES:
- ``FakePipeline`` steps a search the way ``ktt.case_search`` drives it (proposals in flight,
  compile slots filled most urgent first, re-ranked when the strategy changes course, proposals
  it no longer wants withdrawn before they start), deterministically, for every strategy;
- ``ktt.case_search.CaseSearch`` itself runs with ``FakeCompilePool`` (one compile slot in a
  thread, priority order, each compile a short sleep) and ``FakeGpuWorker`` (a made-up cost),
  to show that after a new best is reported its neighbours are compiled and measured before
  the random proposals queued earlier, and that exhaustive keeps its declared order.
"""

from __future__ import annotations

import heapq
import itertools
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import ktt.case_search
from ktt import strategies
from ktt.case_search import CaseSearch
from ktt.expressions import Expression
from ktt.nvrtc import CompileOutput
from ktt.search import Search
from ktt.space import Key, SearchSpace

NAMES = strategies.names()


def small_space() -> SearchSpace:
    return SearchSpace({"A": [1, 2, 3, 4, 5, 6], "B": [1, 2, 3, 4, 5, 6], "C": ["x", "y"]}, [Expression("A + B <= 8")])


def bowl_space() -> SearchSpace:
    """10^4 configurations; listed or not, as a test needs."""
    return SearchSpace({f"P{i}": list(range(10)) for i in range(4)}, [])


def bowl(key: Key) -> float:
    """A made-up cost with one minimum at (7, 2, 5, 3): a directed search keeps finding new bests."""
    return 1.0 + sum((x - c) ** 2 for x, c in zip(key, (7, 2, 5, 3), strict=True)) / 10


def adjacent(a: Key, b: Key) -> bool:
    """One parameter one step apart (``SearchSpace.neighbours`` for these integer ranges)."""
    diff = [abs(x - y) for x, y in zip(a, b, strict=True)]
    return sorted(diff)[-1] == 1 and sum(diff) == 1


# -- the pipeline, stepped ---------------------------------------------------------------------


@dataclass
class FakePipeline:
    """A FAKE of case_search's queue, in steps: ``lookahead`` proposals in flight.

    Each step fills the queue and starts ``slots`` compiles, most urgent first, then in proposal
    order (proposal order alone when ``ordered`` is False, as before strategies could rank);
    a compile takes one step. Every ``burst`` steps the GPU measures what is compiled, most
    urgent first, and reports it (results arrive in bursts, as from the GPU thread); then, if
    the strategy changed course, what waits to compile is ranked again and what the strategy
    no longer wants is withdrawn.
    """

    search: Search
    cost: Callable[[Key], float | None]
    slots: int = 2
    lookahead: int = 16
    burst: int = 3
    ordered: bool = True
    waiting: list[list[Any]] = field(default_factory=list)  # [urgency, seq, key], not started
    ready: list[list[Any]] = field(default_factory=list)  # compiled, not measured
    measured: list[Key] = field(default_factory=list)
    withdrawn: list[Key] = field(default_factory=list)
    seq: itertools.count = field(default_factory=itertools.count)

    def _take(self, queue: list[list[Any]]) -> list[Any]:
        first = min(queue, key=lambda w: (-w[0], w[1]))
        queue.remove(first)
        return first

    def run(self, limit: int) -> list[Key]:
        course = self.search.course()
        for step in itertools.count(1):
            while (
                len(self.waiting) + len(self.ready) < self.lookahead
                and len(self.measured) + len(self.waiting) + len(self.ready) < limit
            ):
                key = self.search.propose()
                if key is None:
                    break
                urgency = (self.search.urgency(key) or 0) if self.ordered else 0
                self.waiting.append([urgency, next(self.seq), key])
            for _ in range(min(self.slots, len(self.waiting))):
                self.ready.append(self._take(self.waiting))
            if not self.ready:
                break
            if step % self.burst:
                continue
            while self.ready:
                key = self._take(self.ready)[2]
                assert key not in self.search.results, "measured twice"
                self.measured.append(key)
                self.search.report(key, self.cost(key))
            if self.ordered and self.search.course() != course:
                course = self.search.course()
                for w in list(self.waiting):
                    urgency = self.search.urgency(w[2])
                    if urgency is None:
                        self.waiting.remove(w)
                        self.search.withdraw(w[2])
                        self.withdrawn.append(w[2])
                    else:
                        w[0] = urgency
        return self.measured


@pytest.mark.parametrize("name", NAMES)
def test_every_strategy_is_reproducible_and_valid_with_the_ordered_queue(name: str) -> None:
    space = bowl_space()
    keys = space.enumerate(20_000)
    assert keys is not None
    runs = []
    for seed in (5, 5, 6):
        search = Search(space, keys, name, seed)
        search.pace(40, 1.0, 5.0)  # 200 of 10,000 fit: the directed strategies direct
        pipe = FakePipeline(search, bowl)
        order = pipe.run(200)
        assert len(order) == len(set(order)) == 200 and search.rejected == 0
        assert set(order) <= set(keys)
        assert set(search.results) == set(order), "a withdrawn proposal was counted"
        assert search.withdrawn == len(pipe.withdrawn)
        in_flight = {w[2] for w in pipe.waiting + pipe.ready}
        assert search.proposed == set(order) | in_flight, "a withdrawn proposal is still marked as proposed"
        runs.append((order, pipe.withdrawn))
    assert runs[0] == runs[1], "the same seed must give the same proposals and withdrawals"
    if name != "exhaustive":
        assert runs[0][0] != runs[2][0]


@pytest.mark.parametrize("name", NAMES)
def test_withdrawn_proposals_are_unvisited_again_and_the_space_is_still_covered(name: str) -> None:
    space = small_space()
    keys = space.enumerate(1000)
    assert keys is not None

    def cost(k: Key) -> float:
        return 1.0 + abs(k[0] - 3) + abs(k[1] - 4) + (0.5 if k[2] == "y" else 0.0)

    search = Search(space, keys, name, 1)
    search.pace(20, 1.0, 1.0)
    pipe = FakePipeline(search, cost, lookahead=12)
    order = pipe.run(10_000)
    assert sorted(order, key=str) == sorted(keys, key=str)
    assert search.exhausted() and search.propose() is None


def test_exhaustive_is_unaffected_by_the_ordered_queue() -> None:
    space = bowl_space()
    keys = space.enumerate(20_000)
    assert keys is not None
    search = Search(space, keys, "exhaustive", 0)
    pipe = FakePipeline(search, bowl)
    assert pipe.run(300) == keys[:300]
    assert search.course() == 0 and search.withdrawn == 0
    assert all(w[0] == 0 for w in pipe.waiting + pipe.ready)


def test_an_annealing_chain_that_moves_gives_up_its_proposals_around_the_old_place() -> None:
    search = Search(bowl_space(), None, "annealing", 0)
    first = [search.propose() for _ in range(4)]  # no chain has a place yet: random, routine
    assert all(k is not None and search.urgency(k) == 0 for k in first)
    for k in first[:2]:  # one result per chain: each chain starts there
        search.report(k, bowl(k))
    moves = [k for k in (search.propose() for _ in range(8)) if k is not None]
    assert all(search.urgency(k) == 1 for k in moves)
    course, stall = search.course(), list(search.strategy.since_better)  # type: ignore[attr-defined]
    search.report(moves[0], 0.001)  # far faster: the chain moves there
    assert search.course() != course
    stale = [k for k in moves[1:] if search.urgency(k) is None]
    kept = [k for k in moves[1:] if search.urgency(k) == 1]
    assert stale and kept and len(stale) + len(kept) == len(moves) - 1
    for k in stale:
        search.withdraw(k)
        assert k not in search.proposed and k not in search.results
    assert search.withdrawn == len(stale)
    assert sum(search.strategy.since_better) < sum(stall)  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="measured or never proposed"):
        search.withdraw(moves[0])


def test_neighbours_of_a_configuration_that_left_the_three_best_are_given_up() -> None:
    space = bowl_space()
    keys = space.enumerate(20_000)
    search = Search(space, keys, "random_local", 0)
    search.pace(40, 1.0, 1.0)  # refine
    while len(search.results) < 12:  # WARMUP_RESULTS
        k = search.propose()
        assert k is not None
        search.report(k, 100.0 + len(search.results))
    local = {}
    while len(local) < 6:
        k = search.propose()
        assert k is not None
        if search.urgency(k):
            local[k] = search.strategy.centre[k]  # type: ignore[attr-defined]
    assert {search.urgency(k) for k in local} <= {1, 2, 3}
    for k in [k for k in keys if k not in search.proposed][:3]:  # three new leaders
        search.proposed.add(k)
        search.report(k, 1.0)
    assert all(search.urgency(k) is None for k in local)
    k = next(iter(local))
    search.withdraw(k)
    assert k not in search.strategy.centre and k not in search.proposed  # type: ignore[attr-defined]


def _neighbour_delays(order: list[Key]) -> list[int]:
    """For each new best: how many measurements until one of its neighbours was measured."""
    delays = []
    best = float("inf")
    for i, key in enumerate(order):
        if bowl(key) < best:
            best = bowl(key)
            j = next((j for j in range(i + 1, len(order)) if adjacent(order[j], key)), None)
            if j is not None:
                delays.append(j - i)
    return delays


@pytest.mark.parametrize("name", ["random_local", "genetic", "annealing"])
def test_ordering_measures_the_neighbours_of_a_new_best_sooner(name: str) -> None:
    """Median over seeds: a new best's first neighbour is measured after fewer measurements."""
    ordered, fifo = [], []
    for seed in range(4):
        for flag, out in ((True, ordered), (False, fifo)):
            search = Search(bowl_space(), None, name, seed)
            out.extend(_neighbour_delays(FakePipeline(search, bowl, lookahead=30, ordered=flag).run(300)))
    assert statistics.median(ordered) < statistics.median(fifo), (statistics.median(ordered), statistics.median(fifo))


# -- CaseSearch with a fake compile pool and a fake GPU worker ---------------------------------


class FakeCompilePool:
    """A FAKE of ktt.compile_pool.CompilePool: one compile slot, lowest priority first, each compile a sleep."""

    def __init__(self, compile_s: float) -> None:
        self.compile_s = compile_s
        self.heap: list[tuple[float, int, Any, Future]] = []
        self.seq = itertools.count()
        self.lock = threading.Condition()
        self.submitted: list[tuple[Key, float]] = []
        self.started: list[Key] = []
        self.events: list[tuple[Any, ...]] = []  # ("submit", id, key, priority) and ("start", id), in order
        self.closed = False
        self.thread = threading.Thread(target=self._work, daemon=True)
        self.thread.start()

    def submit(self, req: Key, priority: float | None = None) -> Future:
        fut: Future = Future()
        with self.lock:
            p = float(next(self.seq)) if priority is None else priority
            sid = next(self.seq)
            self.submitted.append((req, p))
            self.events.append(("submit", sid, req, p))
            heapq.heappush(self.heap, (p, sid, req, fut))
            self.lock.notify()
        return fut

    def reprioritize(self, future: Future, priority: float) -> bool:
        with self.lock:
            for i, (_, s, req, fut) in enumerate(self.heap):
                if fut is future:
                    self.heap[i] = (priority, s, req, fut)
                    heapq.heapify(self.heap)
                    return True
        return False

    def shutdown(self) -> None:
        with self.lock:
            self.closed = True
            self.lock.notify()
        self.thread.join(5)

    def _work(self) -> None:
        while True:
            with self.lock:
                while not self.heap and not self.closed:
                    self.lock.wait()
                if self.closed:
                    return
                _, sid, req, fut = heapq.heappop(self.heap)
                if not fut.set_running_or_notify_cancel():
                    continue
                self.started.append(req)
                self.events.append(("start", sid))
            time.sleep(self.compile_s)
            fut.set_result((CompileOutput(True, b"fake", seconds=self.compile_s), f"fake-{'-'.join(map(str, req))}"))


class FakeGpuWorker:
    """A FAKE GPU worker: the made-up ``bowl`` cost, a short sleep per configuration, every request kept."""

    def __init__(self, space: SearchSpace, eval_s: float) -> None:
        self.space = space
        self.eval_s = eval_s
        self.order: list[Key] = []

    def evaluate(self, msg: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        key = self.space.key(msg["config"])
        self.order.append(key)
        time.sleep(self.eval_s)
        return {"status": "ok", "time_ms": bowl(key), "confirmed": True, "repeats": 1}

    def ensure_started(self) -> None:
        pass


class FakeTuner:
    """A FAKE of ktt.tune.Tuner: only what CaseSearch reads; the compile request is the key itself."""

    def __init__(self, space: SearchSpace, strategy: str, tmp: Path, compile_s: float, eval_s: float) -> None:
        self.space = space
        self.opts = SimpleNamespace(strategy=strategy, seed=0, config_timeout_s=10.0)
        self.pool = FakeCompilePool(compile_s)
        self.worker = FakeGpuWorker(space, eval_s)
        self.workers = 15  # what the lookahead is computed from (2 x workers proposals in flight)
        self.ctx = SimpleNamespace(request=lambda config, shape: space.key(config))
        self.spec = None  # read only by launch_plan, which the tests replace
        self.cache_dir = None
        self.work = SimpleNamespace(root=tmp)
        self.problem = SimpleNamespace(shapes=[SimpleNamespace(name="default")])
        self.compile_s_total = 0.0
        self.logs: list[str] = []
        self.start = time.monotonic()

    def emit(self, event: object) -> None:
        pass

    def log(self, message: str, level: str = "info") -> None:
        self.logs.append(message)

    def append_result(self, search: CaseSearch, result: object) -> None:
        pass

    def elapsed(self) -> float:
        return time.monotonic() - self.start


@pytest.fixture
def no_launch_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """The configurations launch nothing (the fake worker does not read the plan)."""
    monkeypatch.setattr(ktt.case_search, "launch_plan", lambda spec, config, shape: ([], []))


def run_case(
    tmp: Path, strategy: str, keys: list[Key] | None, count: int, compile_s: float = 0.004, eval_s: float = 0.0005
) -> tuple[CaseSearch, FakeTuner]:
    space = bowl_space()
    tuner = FakeTuner(space, strategy, tmp, compile_s, eval_s)
    case = CaseSearch(tuner, tuner.problem.shapes[0], 0, space, keys, None, count)  # type: ignore[arg-type]
    try:
        case.run()
    finally:
        tuner.pool.shutdown()
    return case, tuner


def test_case_search_measures_a_new_bests_neighbours_before_older_random_proposals(
    tmp_path: Path, no_launch_plan: None
) -> None:
    case, tuner = run_case(tmp_path, "random_local", None, 240)  # not listed: refinement from the start
    pool = tuner.pool
    order = tuner.worker.order
    assert len(order) == len(set(order)) == case.evaluated == 240
    assert [r.config for r in case.results] == [case.space.config(k) for k in order]
    # Priorities as case_search gave them: neighbours of the best (urgency > 0) below every routine one.
    urgent = [(req, p) for req, p in pool.submitted if p < 0]
    assert urgent and any(p >= 0 for _, p in pool.submitted)
    # An urgent proposal started before every routine proposal that was still waiting when it came.
    started = {e[1] for e in pool.events if e[0] == "start"}
    waiting: set[int] = set()  # routine submissions not started yet
    ahead_of: dict[int, set[int]] = {}  # an urgent submission not started yet -> the routine ones it must beat
    overtaken = 0
    for event in pool.events:
        if event[0] == "submit":
            sid, priority = event[1], event[3]
            if priority >= 0:
                waiting.add(sid)
            elif sid in started:  # (a withdrawn one never starts)
                ahead_of[sid] = set(waiting)
                overtaken += len(waiting)
        else:
            sid = event[1]
            waiting.discard(sid)
            ahead_of.pop(sid, None)
            assert not any(sid in later for later in ahead_of.values()), "an older random proposal compiled first"
    assert overtaken > 100  # the check had older random proposals to overtake
    assert case.withdrawn == case.search.withdrawn and case.proposed == 240
    # And the point of it: a new best's neighbours come much sooner than behind 30 stale proposals.
    delays = _neighbour_delays(order)
    assert delays and statistics.median(delays) <= 8, delays


def test_case_search_without_ordering_waits_behind_the_queue(
    tmp_path: Path, no_launch_plan: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same run with every urgency 0 (proposal order, as before): the neighbours wait behind the queue."""
    monkeypatch.setattr(Search, "urgency", lambda self, key: 0)
    monkeypatch.setattr(Search, "course", lambda self: 0)
    case, tuner = run_case(tmp_path, "random_local", None, 240)
    assert all(p >= 0 for _, p in tuner.pool.submitted) and case.withdrawn == 0
    assert statistics.median(_neighbour_delays(tuner.worker.order)) > 12


def test_case_search_withdraws_what_annealing_gave_up_and_never_counts_it(tmp_path: Path, no_launch_plan: None) -> None:
    case, tuner = run_case(tmp_path, "annealing", None, 150)
    pool, order = tuner.pool, tuner.worker.order
    assert case.withdrawn > 0 and case.withdrawn == case.search.withdrawn
    assert len(pool.submitted) == case.evaluated + case.withdrawn == 150 + case.withdrawn
    assert len(pool.started) == len(order) == len(set(order)) == len(case.results) == 150
    assert set(order) == set(case.search.results)
    assert tuner.logs == [f"{case.withdrawn} proposals withdrawn before compiling (the strategy changed course)"]


def test_case_search_keeps_the_exhaustive_order(tmp_path: Path, no_launch_plan: None) -> None:
    space = bowl_space()
    keys = space.enumerate(20_000)
    assert keys is not None
    case, tuner = run_case(tmp_path, "exhaustive", keys, 120)
    pool = tuner.pool
    assert tuner.worker.order == keys[:120] == pool.started
    priorities = [p for _, p in pool.submitted]
    assert priorities == sorted(priorities) and all(p > 0 for p in priorities)
    assert case.withdrawn == 0 and case.search.withdrawn == 0 and not tuner.logs
