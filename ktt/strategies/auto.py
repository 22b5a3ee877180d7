"""auto (the default): exhaustive where the budget covers the space, a directed search where it cannot.

A space that was listed starts as ``random_local`` (a seeded random order: given the time it
is exhaustive, so small spaces are walked whole). Once the tuner has measured its rate
over ``SETTLED`` results (``pace``): if the configurations left are more than ``LARGE_FACTOR`` times what the rest
of the budget allows, the search hands over to ``LARGE_STRATEGY``; if they merely do not
fit, ``random_local`` switches on its refinement around the three best (ktt's policy before
strategies existed). A space too large to list goes to ``LARGE_STRATEGY`` from the start.
The hand-over keeps every result: the history is shared.
"""

from __future__ import annotations

from ktt.space import Key, SearchSpace
from ktt.strategies.base import History, Pace, Strategy
from ktt.strategies.genetic import Genetic
from ktt.strategies.random_local import RandomLocal

LARGE_FACTOR = 4.0
SETTLED = 48  # results before the rate is trusted (the compile pipeline starts slowly)


def _large_strategy() -> type[Strategy]:
    return Genetic


class Auto(Strategy):
    name = "auto"
    summary = (
        "default: random order (exhaustive given the time) on spaces the budget covers; "
        "a genetic search once the space is several times what the budget allows"
    )
    exhaustive = False

    def __init__(self, space: SearchSpace, keys: list[Key] | None, history: History, seed: int) -> None:
        super().__init__(space, keys, history, seed)
        first = RandomLocal if keys is not None else _large_strategy()
        self.inner: Strategy = first(space, keys, history, seed)

    def next_key(self) -> Key | None:
        return self.inner.next_key()

    def report(self, key: Key, time_ms: float | None) -> None:
        self.inner.report(key, time_ms)

    def urgency(self, key: Key) -> int | None:
        return self.inner.urgency(key)

    def course(self) -> int:
        return self._course + self.inner.course()

    def withdrawn(self, key: Key) -> None:
        self.inner.withdrawn(key)

    def exhausted(self) -> bool:
        return self.inner.exhausted()

    def valid(self, key: Key) -> bool:
        return self.inner.valid(key)

    def pace(self, pace: Pace) -> str | None:
        if isinstance(self.inner, RandomLocal) and self.keys is not None and pace.evaluated >= SETTLED:
            remaining = len(self.keys) - len(self.history.proposed)
            if remaining > LARGE_FACTOR * pace.configs_left:
                cls = _large_strategy()
                self._course = self.course() + 1  # a new inner strategy ranks the queue its own way
                self.inner = cls(self.space, self.keys, self.history, self.seed)
                return (
                    f"the space is {remaining / max(1.0, pace.configs_left):.0f}x what the budget covers at "
                    f"{pace.rate:.1f} configs/s; searching with {cls.name}"
                )
        return self.inner.pace(pace)

    def label(self) -> str:
        inner = self.inner.label()
        return inner if isinstance(self.inner, RandomLocal) else f"auto: {inner}"
