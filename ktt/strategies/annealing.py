"""annealing: simulated annealing, several chains at once so that proposals can be in flight.

Each chain holds a current configuration; a proposal is an unvisited valid neighbour of a
chain's current one (one or two parameters moved, mostly by one step). When its time comes
back, the chain moves there if it is faster, or with probability exp(-Δ / (T · current))
if slower: the temperature T is relative to the current time and cools geometrically from
``T_START`` to ``T_END`` over the evaluations the budget allows (``pace``; 1,000 until the
tuner has measured its rate). A chain that has not improved for ``STALL`` proposals restarts
from the best configuration so far.

In the compile queue a chain's proposals go before random fallbacks (urgency 1, else 0); once
the chain moves (or restarts), its proposals around the configuration it left are no longer
wanted (withdrawn if their compile has not started, which also gives back their stall count).
"""

from __future__ import annotations

import math

from ktt.space import Key, SearchSpace
from ktt.strategies.base import REPAIR_TRIES, History, Pace, Strategy

CHAINS = 2
T_START = 0.05
T_END = 0.002
STALL = 40
DEFAULT_HORIZON = 1000


class Annealing(Strategy):
    name = "annealing"
    summary = "simulated annealing: several chains of neighbour moves, accepting slower ones less as it cools"

    def __init__(self, space: SearchSpace, keys: list[Key] | None, history: History, seed: int) -> None:
        super().__init__(space, keys, history, seed)
        self.current: list[Key | None] = [None] * CHAINS
        self.chain_best: list[float] = [math.inf] * CHAINS
        self.since_better: list[int] = [0] * CHAINS
        self.pending: dict[Key, tuple[int, Key | None]] = {}  # in flight -> (chain, the current it moved from)
        self.turn = 0
        self.horizon = DEFAULT_HORIZON

    def temperature(self) -> float:
        progress = min(1.0, len(self.history.results) / max(1, self.horizon))
        return T_START * (T_END / T_START) ** progress

    def pace(self, pace: Pace) -> str | None:
        if math.isfinite(pace.configs_left):
            self.horizon = max(CHAINS * 4, int(pace.evaluated + pace.configs_left))
        return None

    def next_key(self) -> Key | None:
        c = self.turn % CHAINS
        self.turn += 1
        if self.current[c] is None:
            seeds = self.history.best(CHAINS)  # after a switch from another strategy: start from its best
            if c < len(seeds) and not any(p[0] == c for p in self.pending.values()):
                self.current[c] = seeds[c]
                self.chain_best[c] = self.history.cost(seeds[c])
        start = self.current[c]
        if self.since_better[c] >= STALL:
            best = self.history.best(1)
            start = self.current[c] = best[0] if best else None
            self.since_better[c] = 0
            self.change_course()
        key = None
        origin = None
        if start is not None:
            rate = 1.0 / max(1, len(self.space.names))
            for _ in range(REPAIR_TRIES):
                cand = self.mutate(start, rate, far=0.1)
                if self.fresh(cand):
                    key, origin = cand, start
                    break
        if key is None:
            key = self.random_unvisited()
        if key is not None:
            self.pending[key] = (c, origin)
            self.since_better[c] += 1
        return key

    def urgency(self, key: Key) -> int | None:
        c, origin = self.pending.get(key, (0, None))
        if origin is None:
            return 0
        return 1 if origin == self.current[c] else None

    def withdrawn(self, key: Key) -> None:
        entry = self.pending.pop(key, None)
        if entry is not None:
            self.since_better[entry[0]] = max(0, self.since_better[entry[0]] - 1)
        super().withdrawn(key)

    def report(self, key: Key, time_ms: float | None) -> None:
        entry = self.pending.pop(key, None)
        if entry is None or time_ms is None:
            return
        c = entry[0]
        cur = self.current[c]
        if time_ms < self.chain_best[c]:
            self.chain_best[c] = time_ms
            self.since_better[c] = 0
        if cur is None:
            self.current[c] = key
            return
        now = self.history.cost(cur)
        if time_ms <= now or self.rng.random() < math.exp(-(time_ms - now) / (self.temperature() * now)):
            self.current[c] = key
            self.change_course()  # the chain's proposals around ``cur`` are no longer wanted
