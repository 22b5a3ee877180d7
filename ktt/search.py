"""Which configuration to try next: the tuner's side of the strategy seam (``ktt/strategies/``).

``Search`` owns the history (what was proposed, what was reported) and asks the chosen
strategy for the next configuration. It is also the guard: a proposal that is not a valid,
unvisited configuration of the restricted space (``Strategy.valid``: the listed keys, else the
restrictions) is never handed to the tuner (it is counted
in ``rejected``, which the tests keep at zero). ``pace`` passes the measured rate and the
budget left to the strategy, which may change course (``auto`` does). Proposals depend only
on the seed and the results reported, so a run is reproducible up to timing noise.

The tuner orders its compile queue by ``urgency`` (asked again when ``course`` changes) and
may ``withdraw`` a proposal whose compile has not started: it is handed back to the strategy
as unvisited, was never measured and is never counted.
"""

from __future__ import annotations

import math

from ktt import strategies
from ktt.space import Key, SearchSpace
from ktt.strategies import History, Pace, Strategy

STRATEGIES = tuple(strategies.names())
MAX_REJECTED_IN_A_ROW = 64  # a strategy that keeps proposing invalid keys is treated as finished


class Search:
    def __init__(self, space: SearchSpace, keys: list[Key] | None, mode: str = "auto", seed: int = 0) -> None:
        self.space = space
        self.keys = keys
        self.mode = mode
        self.seed = seed
        self.history = History()
        self.strategy: Strategy = strategies.make(mode, space, keys, self.history, seed)
        self.rejected = 0
        self.withdrawn = 0
        self._given_up = False

    @property
    def proposed(self) -> set[Key]:
        return self.history.proposed

    @property
    def results(self) -> dict[Key, float | None]:
        return self.history.results

    def remaining(self) -> int | None:
        return None if self.keys is None else len(self.keys) - len(self.history.proposed)

    def exhausted(self) -> bool:
        return self._given_up or self.strategy.exhausted()

    def strategy_name(self) -> str:
        return self.strategy.label()

    def propose(self) -> Key | None:
        in_a_row = 0
        while not self.exhausted():
            key = self.strategy.next_key()
            if key is None:
                self._given_up = True
                return None
            if self._acceptable(key):
                self.history.proposed.add(key)
                return key
            self.rejected += 1
            in_a_row += 1
            if in_a_row >= MAX_REJECTED_IN_A_ROW:
                self._given_up = True
        return None

    def report(self, key: Key, time_ms: float | None) -> None:
        self.history.record(key, time_ms)
        self.strategy.report(key, time_ms)

    def urgency(self, key: Key) -> int | None:
        """How soon the strategy wants a proposal in flight measured (higher first); None: no longer wanted."""
        return self.strategy.urgency(key)

    def course(self) -> int:
        """Changes when the strategy's urgencies may have changed: then the tuner re-ranks its queue."""
        return self.strategy.course()

    def withdraw(self, key: Key) -> None:
        """Take back a proposal that was not measured: unvisited again, it may be proposed later."""
        if key in self.history.results or key not in self.history.proposed:
            raise ValueError(f"cannot withdraw {key!r}: it was measured or never proposed")
        self.history.proposed.discard(key)
        self.withdrawn += 1
        self._given_up = False  # the strategy has something to propose again
        self.strategy.withdrawn(key)

    def pace(
        self, evaluated: int, elapsed_s: float, time_left_s: float | None, count_left: int | None = None
    ) -> str | None:
        """The measured rate and what the budget still allows; returns the strategy's log line if it changed course."""
        rate = evaluated / max(1e-3, elapsed_s)
        left = math.inf if time_left_s is None else rate * max(0.0, time_left_s)
        if count_left is not None:
            left = min(left, max(0, count_left))
        if math.isinf(left):
            return None
        return self.strategy.pace(Pace(evaluated=evaluated, rate=rate, configs_left=left))

    def best(self, k: int = 1) -> list[Key]:
        return self.history.best(k)

    def _acceptable(self, key: Key) -> bool:
        if key in self.history.proposed:
            return False
        return self.strategy.valid(key)  # the listed keys' set (one, the strategy's), else the restrictions
