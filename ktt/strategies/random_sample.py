"""random: uniform random sampling without replacement (a seeded permutation of the listed space)."""

from __future__ import annotations

from ktt.space import Key
from ktt.strategies.base import Strategy


class RandomSample(Strategy):
    name = "random"
    summary = "uniform random sampling without replacement; exhaustive given the time"
    exhaustive = True

    def next_key(self) -> Key | None:
        return self.random_unvisited()
