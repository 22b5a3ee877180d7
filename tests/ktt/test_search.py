from __future__ import annotations

from ktt.expressions import Expression
from ktt.search import Search
from ktt.space import SearchSpace

PARAMS = {"A": [1, 2, 3, 4, 5, 6], "B": [1, 2, 3, 4, 5, 6], "C": [0, 1]}


def space() -> SearchSpace:
    return SearchSpace(PARAMS, [Expression("A + B <= 10")])


def drain(search: Search, cost=lambda k: None) -> list:
    order = []
    while (key := search.propose()) is not None:
        order.append(key)
        search.report(key, cost(key))
    return order


def test_exhaustive_walks_the_declared_order_once() -> None:
    s = space()
    keys = s.enumerate(10_000)
    assert drain(Search(s, keys, "exhaustive")) == keys
    assert Search(s, keys, "exhaustive").strategy_name() == "exhaustive (cut by budget)"


def test_auto_is_a_seeded_permutation() -> None:
    s = space()
    keys = s.enumerate(10_000)
    a = drain(Search(s, keys, "auto", seed=1))
    b = drain(Search(s, keys, "auto", seed=1))
    c = drain(Search(s, keys, "auto", seed=2))
    assert a == b != c and sorted(a) == sorted(keys)
    search = Search(s, keys, "auto", seed=1)
    drain(search)
    assert search.strategy_name() == "exhaustive" and search.exhausted()


def test_refinement_proposes_neighbours_of_the_best() -> None:
    from ktt.strategies.random_local import WARMUP_RESULTS

    s = space()
    keys = s.enumerate(10_000)
    search = Search(s, keys, "random_local", seed=3)
    assert search.pace(8, 1.0, 1.0) is not None  # 8 configs/s, 1 s left: the space will not fit
    best = (3, 3, 0)

    def cost(k: tuple) -> float:
        return 1.0 + sum(abs(x - y) for x, y in zip(k, best, strict=True))

    proposals = []
    while len(proposals) < 40:
        key = search.propose()
        assert key is not None and key not in proposals
        proposals.append(key)
        search.report(key, cost(key))
    later = proposals[WARMUP_RESULTS:]
    close = [k for k in later if cost(k) <= 3.0]
    assert len(close) > len(later) // 4  # local steps find the good region
    assert len(drain(search, cost)) + 40 == len(keys)


def test_sampling_a_space_too_large_to_list() -> None:
    s = SearchSpace({f"P{i}": list(range(20)) for i in range(6)}, [Expression("P0 < 10")])
    search = Search(s, None, "random_local", seed=0)
    assert search.strategy_name() == "random+local"
    got = [search.propose() for _ in range(50)]
    assert len(set(got)) == 50 and all(k is not None and k[0] < 10 for k in got)
