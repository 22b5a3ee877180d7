"""random_local: the seeded random walk with local refinement (ktt's ``auto`` policy before strategies).

The valid configurations are visited in a seeded random order, which given time is
exhaustive. Refinement switches on when the measured rate says the rest will not fit the
budget (``pace``), or from the start when the space is too large to list: then half of the
proposals, once ``WARMUP_RESULTS`` results are in, are unvisited neighbours (one parameter
moved one step) of the ``TOP_K`` best configurations so far.

In the compile queue a neighbour of the best goes first (urgency ``TOP_K``), of the second
best next, and so on; random proposals keep their order behind them. A neighbour whose centre
has dropped out of the ``TOP_K`` is no longer wanted (withdrawn if its compile has not started).
"""

from __future__ import annotations

from ktt.space import Key, SearchSpace
from ktt.strategies.base import History, Pace, Strategy

LOCAL_FRACTION = 0.5
WARMUP_RESULTS = 12
TOP_K = 3


class RandomLocal(Strategy):
    name = "random_local"
    summary = (
        "seeded random order; once the budget will not cover the space, half the proposals are "
        "neighbours of the three best"
    )
    exhaustive = True

    def __init__(self, space: SearchSpace, keys: list[Key] | None, history: History, seed: int) -> None:
        super().__init__(space, keys, history, seed)
        self.refine = keys is None  # a space too large to list will not fit any budget
        self.centre: dict[Key, Key] = {}  # a neighbour in flight -> the configuration it neighbours

    def next_key(self) -> Key | None:
        key = None
        if self.refine and len(self.history.results) >= WARMUP_RESULTS and self.rng.random() < LOCAL_FRACTION:
            key = self._local()
        return key if key is not None else self.random_unvisited()

    def report(self, key: Key, time_ms: float | None) -> None:
        self.centre.pop(key, None)
        if self.centre and time_ms is not None and key in self.history.best(TOP_K):
            self.change_course()  # the leaders changed: their neighbours in flight rank differently

    def urgency(self, key: Key) -> int | None:
        centre = self.centre.get(key)
        if centre is None:
            return 0
        top = self.history.best(TOP_K)
        return TOP_K - top.index(centre) if centre in top else None

    def withdrawn(self, key: Key) -> None:
        self.centre.pop(key, None)
        super().withdrawn(key)

    def pace(self, pace: Pace) -> str | None:
        if self.refine or self.keys is None:
            return None
        remaining = len(self.keys) - len(self.history.proposed)
        if remaining > pace.configs_left:
            self.refine = True
            return f"the space will not fit the budget at {pace.rate:.1f} configs/s; refining around the best"
        return None

    def label(self) -> str:
        if self.keys is not None and len(self.history.results) >= len(self.keys):
            return "exhaustive"
        return "random+local" if self.refine else "random"

    def _local(self) -> Key | None:
        for center in self.history.best(TOP_K):
            options = [n for n in self.space.neighbours(center) if self.fresh(n)]
            if options:
                key = self.rng.choice(options)
                self.centre[key] = center
                return key
        return None
