"""genetic: a steady-state genetic algorithm over the restricted space.

The population is the best ``POPULATION`` configurations measured so far (elitist, so a
result arriving late still counts). Each proposal is a child of two parents picked by
binary tournament: uniform crossover of the parameter values, then mutation (each parameter
moves one step with probability 1/parameters, sometimes anywhere). A child that breaks a
restriction or was proposed before is bred again (``REPAIR_TRIES``), else a random unvisited
configuration is proposed. A fifth of the proposals climb instead: an unvisited neighbour of
one of the two best. Being steady-state, it never waits for a generation to finish,
which suits the tuner's many proposals in flight.

In the compile queue a climb from the best goes first (urgency 3), then one from the second
best (2), then children (1), then immigrants (0). A climb whose centre is no longer one of
the two best is no longer wanted (withdrawn if its compile has not started).
"""

from __future__ import annotations

from ktt.space import Key, SearchSpace
from ktt.strategies.base import REPAIR_TRIES, History, Strategy

POPULATION = 8
LOCAL = 0.2  # fraction of proposals that are unvisited neighbours of the best (hill climbing)
IMMIGRANTS = 0.1  # fraction of proposals that are random unvisited configurations
CLIMB_FROM = 2  # climbs start from the two best
CHILD = 1  # a child's urgency; a climb from the i-th best (from 0): CHILD + CLIMB_FROM - i; an immigrant: 0


class Genetic(Strategy):
    name = "genetic"
    summary = "steady-state genetic algorithm: crossover and mutation of the best configurations so far"

    def __init__(self, space: SearchSpace, keys: list[Key] | None, history: History, seed: int) -> None:
        super().__init__(space, keys, history, seed)
        self.climbs: dict[Key, Key] = {}  # a climb in flight -> the configuration it climbs from
        self.children: set[Key] = set()  # children in flight

    def next_key(self) -> Key | None:
        pop = self.history.best(POPULATION)
        if len(pop) < POPULATION // 2 or self.rng.random() < IMMIGRANTS:
            return self.random_unvisited()
        if self.rng.random() < LOCAL:
            for center in pop[:CLIMB_FROM]:
                options = [n for n in self.space.neighbours(center) if self.fresh(n)]
                if options:
                    key = self.rng.choice(options)
                    self.climbs[key] = center
                    return key
        rate = 1.0 / max(1, len(self.space.names))
        for _ in range(REPAIR_TRIES):
            a, b = self._tournament(pop), self._tournament(pop)
            child = tuple(x if self.rng.random() < 0.5 else y for x, y in zip(a, b, strict=True))
            if child in (a, b) or self.rng.random() < 0.5:
                child = self.mutate(child, rate)
            if self.fresh(child):
                self.children.add(child)
                return child
        return self.random_unvisited()

    def report(self, key: Key, time_ms: float | None) -> None:
        self.climbs.pop(key, None)
        self.children.discard(key)
        if self.climbs and time_ms is not None and key in self.history.best(CLIMB_FROM):
            self.change_course()  # the climbs in flight start from other ranks now

    def urgency(self, key: Key) -> int | None:
        centre = self.climbs.get(key)
        if centre is None:
            return CHILD if key in self.children else 0
        top = self.history.best(CLIMB_FROM)
        return CHILD + CLIMB_FROM - top.index(centre) if centre in top else None

    def withdrawn(self, key: Key) -> None:
        self.climbs.pop(key, None)
        self.children.discard(key)
        super().withdrawn(key)

    def _tournament(self, pop: list[Key]) -> Key:
        i, j = self.rng.randrange(len(pop)), self.rng.randrange(len(pop))
        return pop[min(i, j)]  # pop is sorted fastest first
