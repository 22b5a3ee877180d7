"""genetic: a steady-state genetic algorithm over the restricted space.

The population is the best ``POPULATION`` configurations measured so far (elitist, so a
result arriving late still counts). Each proposal is a child of two parents picked by
binary tournament: uniform crossover of the parameter values, then mutation (each parameter
moves one step with probability 1/parameters, sometimes anywhere). A child that breaks a
restriction or was proposed before is bred again (``REPAIR_TRIES``), else a random unvisited
configuration is proposed. A fifth of the proposals climb instead: an unvisited neighbour of
one of the two best. Being steady-state, it never waits for a generation to finish,
which suits the tuner's many proposals in flight.
"""

from __future__ import annotations

from ktt.space import Key
from ktt.strategies.base import REPAIR_TRIES, Strategy

POPULATION = 8
LOCAL = 0.2  # fraction of proposals that are unvisited neighbours of the best (hill climbing)
IMMIGRANTS = 0.1  # fraction of proposals that are random unvisited configurations


class Genetic(Strategy):
    name = "genetic"
    summary = "steady-state genetic algorithm: crossover and mutation of the best configurations so far"

    def next_key(self) -> Key | None:
        pop = self.history.best(POPULATION)
        if len(pop) < POPULATION // 2 or self.rng.random() < IMMIGRANTS:
            return self.random_unvisited()
        if self.rng.random() < LOCAL:
            for center in pop[:2]:
                options = [n for n in self.space.neighbours(center) if self.fresh(n)]
                if options:
                    return self.rng.choice(options)
        rate = 1.0 / max(1, len(self.space.names))
        for _ in range(REPAIR_TRIES):
            a, b = self._tournament(pop), self._tournament(pop)
            child = tuple(x if self.rng.random() < 0.5 else y for x, y in zip(a, b, strict=True))
            if child in (a, b) or self.rng.random() < 0.5:
                child = self.mutate(child, rate)
            if self.fresh(child):
                return child
        return self.random_unvisited()

    def _tournament(self, pop: list[Key]) -> Key:
        i, j = self.rng.randrange(len(pop)), self.rng.randrange(len(pop))
        return pop[min(i, j)]  # pop is sorted fastest first
