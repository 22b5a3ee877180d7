from __future__ import annotations

import itertools
import random
import time

from ktt.expressions import Expression
from ktt.space import SearchSpace


def brute(params: dict, restrictions: list[str], constants: dict) -> list[tuple]:
    exprs = [Expression(r) for r in restrictions]
    out = []
    for combo in itertools.product(*params.values()):
        env = {**constants, **dict(zip(params, combo, strict=True))}
        if all(e.evaluate(env) for e in exprs):
            out.append(combo)
    return out


def test_enumeration_matches_the_product_filtered() -> None:
    rng = random.Random(1)
    for _ in range(20):
        params = {f"P{i}": sorted(rng.sample(range(1, 33), rng.randint(1, 5))) for i in range(rng.randint(1, 4))}
        names = list(params)
        restrictions = [
            f"{rng.choice(names)} * {rng.choice(names)} <= {rng.randint(4, 400)}",
            f"({rng.choice(names)} + N) % 2 == 0",
        ]
        space = SearchSpace(params, [Expression(r) for r in restrictions], {"N": 3})
        assert list(space.iter_valid()) == brute(params, restrictions, {"N": 3})


def test_a_ten_million_product_is_pruned_early() -> None:
    params = {f"P{i}": list(range(10)) for i in range(7)}  # 10^7 combinations
    restrictions = [
        Expression("P0 + P1 <= 2"),
        Expression("P2 == P3"),
        Expression("P4 * P5 == 0"),
        Expression("P6 < 2"),
    ]
    space = SearchSpace(params, restrictions)
    start = time.perf_counter()
    keys = space.enumerate(limit=100_000)
    assert keys is not None and len(keys) == 6 * 10 * 19 * 2
    assert time.perf_counter() - start < 5.0


def test_limit_sample_contains_and_neighbours() -> None:
    params = {"A": [1, 2, 4, 8], "B": [1, 2, 4, 8]}
    space = SearchSpace(params, [Expression("A * B <= 16")])
    assert space.enumerate(limit=5) is None
    assert space.contains((4, 4)) and not space.contains((8, 4)) and not space.contains((3, 1))
    rng = random.Random(0)
    seen: set = set()
    for _ in range(9):
        key = space.sample(rng, seen)
        assert key is not None and space.contains(key)
        seen.add(key)
    assert set(space.neighbours((2, 4))) == {(1, 4), (4, 4), (2, 2), (2, 8)}
    assert (8, 4) not in space.neighbours((4, 4))


def test_unevaluable_restriction_excludes_and_constants_gate_everything() -> None:
    space = SearchSpace({"A": [0, 1, 2]}, [Expression("8 / A >= 4")])
    assert list(space.iter_valid()) == [(1,), (2,)]
    assert list(SearchSpace({"A": [1]}, [Expression("N > 10")], {"N": 5}).iter_valid()) == []


def test_listing_runs_out_of_time_then_probes_and_counts_the_space_empty() -> None:
    params = {f"P{i}": list(range(10)) for i in range(12)}  # 10^12 configurations
    space = SearchSpace(params, [Expression("P11 < 0")])  # always false, checked at the last parameter
    start = time.perf_counter()
    assert space.enumerate(limit=200_000, time_budget_s=0.5) == []
    assert time.perf_counter() - start < 5.0
    assert space.note is not None and "1,000,000,000,000 configurations" in space.note


def test_listing_out_of_time_with_valid_configurations_falls_back_to_sampling() -> None:
    params = {f"P{i}": list(range(10)) for i in range(12)}
    space = SearchSpace(params, [Expression("P11 == 3")])  # 10^11 valid: too slow to list, easy to sample
    assert space.enumerate(limit=10**12, time_budget_s=0.3) is None
    assert space.note is not None and "sampled" in space.note
    key = space.sample(random.Random(1), set())
    assert key is not None and key[11] == 3
