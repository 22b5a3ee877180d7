"""Which configuration to try next: exhaustive, or random sampling with local refinement.

``auto`` walks the valid configurations in a seeded random order (which, given time, is
exhaustive), and the tuner switches on refinement when the measured rate says the budget
will not cover the space: then half of the proposals are unvisited neighbours (one
parameter moved one step) of the best configurations so far. Proposals depend only on the
seed and the results reported, so a run is reproducible up to timing noise.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from ktt.space import Key, SearchSpace

STRATEGIES = ("auto", "exhaustive", "random")
LOCAL_FRACTION = 0.5
WARMUP_RESULTS = 12
TOP_K = 3


@dataclass
class Search:
    space: SearchSpace
    keys: list[Key] | None  # every valid configuration, when the space was small enough to list
    mode: str = "auto"
    seed: int = 0
    refine: bool = False
    proposed: set[Key] = field(default_factory=set)
    results: dict[Key, float | None] = field(default_factory=dict)
    _order: list[Key] = field(default_factory=list)
    _cursor: int = 0
    _rng: random.Random = field(default_factory=random.Random)
    _sample_failed: bool = False

    def __post_init__(self) -> None:
        if self.mode not in STRATEGIES:
            raise ValueError(f"unknown strategy {self.mode!r} (choose from {', '.join(STRATEGIES)})")
        self._rng = random.Random(self.seed)
        if self.keys is not None:
            self._order = list(self.keys)
            if self.mode != "exhaustive":
                self._rng.shuffle(self._order)
        if self.mode == "random" or (self.mode == "auto" and self.keys is None):
            self.refine = True

    def remaining(self) -> int | None:
        return None if self.keys is None else len(self.keys) - len(self.proposed)

    def exhausted(self) -> bool:
        if self.keys is not None:
            return len(self.proposed) >= len(self.keys)
        return self._sample_failed

    def enable_refinement(self) -> None:
        if self.mode != "exhaustive":
            self.refine = True

    def strategy_name(self) -> str:
        if self.keys is not None and len(self.results) >= len(self.keys):
            return "exhaustive"
        if self.mode == "exhaustive":
            return "exhaustive (cut by budget)"
        return "random+local" if self.refine else "random"

    def propose(self) -> Key | None:
        if self.exhausted():
            return None
        key = None
        if self.refine and len(self.results) >= WARMUP_RESULTS and self._rng.random() < LOCAL_FRACTION:
            key = self._local()
        if key is None:
            key = self._next_unvisited()
        if key is not None:
            self.proposed.add(key)
        return key

    def report(self, key: Key, time_ms: float | None) -> None:
        self.results[key] = time_ms

    def best(self, k: int = 1) -> list[Key]:
        valid = [(t, key) for key, t in self.results.items() if t is not None]
        valid.sort(key=lambda item: item[0])
        return [key for _, key in valid[:k]]

    def _next_unvisited(self) -> Key | None:
        if self.keys is not None:
            while self._cursor < len(self._order):
                key = self._order[self._cursor]
                self._cursor += 1
                if key not in self.proposed:
                    return key
            return None
        key = self.space.sample(self._rng, self.proposed)
        if key is None:
            self._sample_failed = True
        return key

    def _local(self) -> Key | None:
        for center in self.best(TOP_K):
            options = [n for n in self.space.neighbours(center) if n not in self.proposed]
            if options:
                return self._rng.choice(options)
        return None
