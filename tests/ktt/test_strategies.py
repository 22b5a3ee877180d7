"""Every registered strategy's proposals on a recorded space (CPU, no GPU).

The recorded space is bench/gemm_space's tiled SGEMM: 1,313 valid configurations whose times
were measured by ktt on an H200 (bench/large_space/recorded_gemm_space.jsonl). A strategy is
driven as the tuner drives it: proposals kept in flight, results reported later, ``pace`` now
and then.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from ktt import strategies
from ktt.expressions import Expression
from ktt.search import Search
from ktt.space import Key, SearchSpace
from ktt.strategies import History, Strategy
from ktt.strategies.auto import SETTLED

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "bench" / "large_space" / "recorded_gemm_space.jsonl"
GEMM_SPEC = ROOT / "bench" / "gemm_space" / "tuning.yaml"
NAMES = strategies.names()
IN_FLIGHT = 24


def gemm_space() -> tuple[SearchSpace, dict[Key, float | None]]:
    spec = yaml.safe_load(GEMM_SPEC.read_text())
    space = SearchSpace(spec["tune_params"], [Expression(r) for r in spec["restrictions"]])
    table: dict[Key, float | None] = {}
    for line in RECORDED.read_text().splitlines():
        row = json.loads(line)
        table[space.key(row["config"])] = row["time_ms"] if row["status"] == "ok" else None
    return space, table


def small_space() -> SearchSpace:
    return SearchSpace({"A": [1, 2, 3, 4, 5, 6], "B": [1, 2, 3, 4, 5, 6], "C": ["x", "y"]}, [Expression("A + B <= 8")])


def huge_space() -> SearchSpace:
    """10^10 raw combinations, about a third valid: never to be listed."""
    params = {f"P{i}": list(range(10)) for i in range(10)}
    return SearchSpace(params, [Expression("P0 + P1 <= 12"), Expression("P2 * P3 < 40")])


def drive(
    search: Search, cost: Callable[[Key], float | None], limit: int, pace_every: int = 0, configs_left: int = 0
) -> list[Key]:
    """Propose with IN_FLIGHT outstanding, report the oldest, as the tuner's compile queue does."""
    inflight: list[Key] = []
    order: list[Key] = []
    while len(order) < limit:
        while len(inflight) < IN_FLIGHT and len(order) + len(inflight) < limit:
            key = search.propose()
            if key is None:
                break
            inflight.append(key)
        if not inflight:
            break
        key = inflight.pop(0)
        order.append(key)
        search.report(key, cost(key))
        if pace_every and len(order) % pace_every == 0:
            search.pace(len(order), len(order) / 40.0, max(0, configs_left - len(order)) / 40.0)
    return order


@pytest.fixture(scope="module")
def recorded() -> tuple[SearchSpace, list[Key], dict[Key, float | None]]:
    space, table = gemm_space()
    keys = space.enumerate(10_000)
    assert keys is not None and len(keys) == 1313 and set(keys) == set(table)
    return space, keys, table


def test_the_registry_lists_at_least_the_required_strategies() -> None:
    assert {"auto", "exhaustive", "random", "random_local", "genetic", "annealing", "surrogate"} <= set(NAMES)
    assert strategies.DEFAULT == "auto"
    for name, cls in strategies.REGISTRY.items():
        assert cls.name == name and cls.summary and name in strategies.help_text()


@pytest.mark.parametrize("name", NAMES)
def test_reproducible_with_a_seed_and_valid_on_the_recorded_space(name: str, recorded) -> None:
    space, keys, table = recorded
    valid = set(keys)
    runs = []
    for seed in (7, 7, 8):
        search = Search(space, keys, name, seed)
        order = drive(search, table.get, 160, pace_every=20, configs_left=400)
        assert len(order) == 160 and len(set(order)) == 160, "a configuration proposed twice"
        assert set(order) <= valid, "a proposal breaks a restriction"
        assert search.rejected == 0
        runs.append(order)
    assert runs[0] == runs[1], "the same seed must give the same proposals"
    if name != "exhaustive":
        assert runs[0] != runs[2], "another seed should give other proposals"


@pytest.mark.parametrize("name", NAMES)
def test_every_configuration_is_covered_on_a_small_space(name: str) -> None:
    """Given the time every strategy visits the whole space (they fall back to unvisited ones)."""
    space = small_space()
    keys = space.enumerate(1000)
    assert keys is not None and len(keys) == 2 * 26

    def cost(k: Key) -> float:
        return 1.0 + abs(k[0] - 3) + abs(k[1] - 4) + (0.5 if k[2] == "y" else 0.0)

    search = Search(space, keys, name, 1)
    order = drive(search, cost, 10_000)
    assert sorted(order, key=str) == sorted(keys, key=str)
    assert search.exhausted() and search.propose() is None
    if strategies.REGISTRY[name].exhaustive:
        assert len(order) == len(keys)


def test_exhaustive_walks_the_declared_order() -> None:
    space = small_space()
    keys = space.enumerate(1000)
    assert drive(Search(space, keys, "exhaustive"), lambda k: 1.0, 1000) == keys


@pytest.mark.parametrize("name", NAMES)
def test_a_space_too_large_to_list_is_never_walked(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    space = huge_space()

    def no_walk(*_a: object, **_k: object) -> None:
        raise AssertionError("the strategy walked the space")

    monkeypatch.setattr(SearchSpace, "iter_valid", no_walk)
    search = Search(space, None, name, 3)
    started = time.monotonic()
    order = drive(search, lambda k: 1.0 + sum(k) / 10, 150, pace_every=25, configs_left=10_000)
    assert time.monotonic() - started < 30
    assert len(order) == 150 and len(set(order)) == 150
    assert all(space.contains(k) for k in order) and search.rejected == 0
    again = drive(Search(space, None, name, 3), lambda k: 1.0 + sum(k) / 10, 150, pace_every=25, configs_left=10_000)
    assert again == order


def _best_after(name: str, recorded, n: int, seeds: range) -> list[float]:
    space, keys, table = recorded
    best = min(t for t in table.values() if t is not None)
    out = []
    for seed in seeds:
        order = drive(Search(space, keys, name, seed), table.get, n, pace_every=20, configs_left=n)
        found = min((table[k] for k in order if table[k] is not None), default=math.inf)
        out.append(found / best)
    return out


@pytest.mark.parametrize("name", ["genetic", "annealing", "surrogate", "auto"])
def test_directed_strategies_beat_random_sampling_on_the_recorded_space(name: str, recorded) -> None:
    """In 150 of 1,313 evaluations (seeded, so deterministic): closer to the recorded best than random."""
    directed = statistics.median(_best_after(name, recorded, 150, range(5)))
    randomly = statistics.median(_best_after("random", recorded, 150, range(5)))
    assert directed < randomly and directed <= 1.05, (directed, randomly)


def test_auto_stays_exhaustive_when_the_budget_covers_the_space(recorded) -> None:
    space, keys, table = recorded
    search = Search(space, keys, "auto", 0)
    order = drive(search, table.get, 10_000, pace_every=20, configs_left=5000)
    assert len(order) == len(keys) and search.strategy_name() == "exhaustive"


def test_auto_refines_when_the_space_just_does_not_fit(recorded) -> None:
    space, keys, table = recorded
    search = Search(space, keys, "auto", 0)
    drive(search, table.get, SETTLED, pace_every=0)
    assert search.pace(SETTLED, 1.0, 10.0) is not None  # 1,265 left, 480 allowed: refine, not switch
    assert search.strategy_name() == "random+local"


def test_auto_hands_over_to_a_directed_search_when_the_space_is_far_too_large(recorded) -> None:
    space, keys, table = recorded
    search = Search(space, keys, "auto", 0)
    drive(search, table.get, 20)
    message = search.pace(20, 1.0, 2.0)  # too few results to trust the rate for a switch: refinement first
    assert message and "refining" in message and search.strategy_name() == "random+local"
    drive(search, table.get, SETTLED)
    message = search.pace(SETTLED + 20, 1.0, 2.0)
    assert message and "genetic" in message
    assert search.strategy_name() == "auto: genetic"
    before = set(search.history.results)
    more = drive(search, table.get, 50)
    assert not before & set(more) and search.rejected == 0


def test_auto_on_an_unlisted_space_starts_directed() -> None:
    search = Search(huge_space(), None, "auto", 0)
    assert search.strategy_name() == "auto: genetic"


class _Cheater(Strategy):
    name = "cheater"
    summary = "proposes a configuration that breaks the restriction"

    def next_key(self) -> Key | None:
        return (6, 6, "x")


def test_the_search_never_hands_on_a_proposal_outside_the_space(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(strategies.REGISTRY, "cheater", _Cheater)
    space = small_space()
    search = Search(space, space.enumerate(1000), "cheater", 0)
    assert search.propose() is None and search.rejected > 0 and search.exhausted()


def test_unknown_and_unavailable_strategies(monkeypatch: pytest.MonkeyPatch) -> None:
    space = small_space()
    with pytest.raises(ValueError, match="unknown strategy 'nope'"):
        Search(space, None, "nope")
    from ktt.strategies.surrogate import Surrogate

    monkeypatch.setattr(Surrogate, "missing", classmethod(lambda cls: "needs scikit-learn"))
    assert strategies.unavailable("surrogate") == "needs scikit-learn"
    assert strategies.unavailable("genetic") is None


def test_history_counts_failures_as_infinitely_slow() -> None:
    h = History()
    h.record((1,), None)
    h.record((2,), 3.0)
    h.record((3,), float("nan"))
    assert h.best(3) == [(2,)] and h.cost((1,)) == math.inf and h.order == [(1,), (2,), (3,)]


def test_a_product_far_above_the_listing_limit_is_not_walked(monkeypatch: pytest.MonkeyPatch) -> None:
    space = huge_space()
    walked: list[bool] = []
    real = SearchSpace.iter_valid

    def spy(self: SearchSpace, *a: object, **k: object):  # type: ignore[no-untyped-def]
        walked.append(True)
        return real(self, *a, **k)

    monkeypatch.setattr(SearchSpace, "iter_valid", spy)
    assert space.enumerate(200_000) is None and not walked
    assert space.note and "estimated" in space.note
    # A large product with few valid configurations is still listed.
    sparse = SearchSpace({f"P{i}": list(range(10)) for i in range(6)}, [Expression("P0 + P1 + P2 + P3 == 0")])
    keys = sparse.enumerate(200_000)
    assert keys is not None and len(keys) == 100 and walked
