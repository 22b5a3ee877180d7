"""The interface every search strategy implements, and what they share: the history and unvisited sampling.

A strategy proposes one configuration at a time from the restricted space, given the space and
the results reported so far. The tuner keeps several proposals in flight (the compile queue),
so a strategy must propose without waiting for its last proposal's result; results arrive in
any order. Everything random draws from the strategy's own ``random.Random(seed)``, so the
proposals depend only on the seed and on the results reported (and on which proposals the
tuner withdrew, see below).

The compile queue is ordered by what the strategy wants next: ``urgency(key)`` ranks a
proposal in flight (higher first; 0, the default, keeps proposal order; None: no longer
wanted), and ``course()`` changes whenever those answers may have changed (a new best, a
chain that moved), so the tuner asks again only then. A proposal the tuner withdraws before
its compile started goes back through ``withdrawn``: it is unvisited again and was never
measured. docs/TUNING_SPEC.md, "Strategies", describes what each strategy says.
"""

from __future__ import annotations

import bisect
import math
import random
from dataclasses import dataclass, field
from typing import ClassVar

from ktt.space import Key, SearchSpace

# How hard a strategy tries to turn a variation (mutation, crossover, a move) into a valid,
# unvisited configuration before it falls back to a random unvisited one.
REPAIR_TRIES = 32
PODIUM = 8  # the fastest results History keeps sorted, so that best(k <= PODIUM) costs nothing


class StrategyUnavailable(Exception):
    """The strategy cannot run here (a missing optional package); ``str()`` says what to install."""


@dataclass
class History:
    """What the search has done: every key proposed, and the results reported (None: no valid time)."""

    proposed: set[Key] = field(default_factory=set)
    results: dict[Key, float | None] = field(default_factory=dict)
    order: list[Key] = field(default_factory=list)  # reported keys, in report order
    podium: list[tuple[float, Key]] = field(default_factory=list)  # the PODIUM fastest, sorted as best() sorts

    def record(self, key: Key, time_ms: float | None) -> None:
        t = time_ms if time_ms is not None and math.isfinite(time_ms) else None
        again = key in self.results
        if not again:
            self.order.append(key)
        self.results[key] = t
        if again:  # a key reported twice (not done by the tuner): rebuild rather than patch
            self.podium = sorted((v, k) for k, v in self.results.items() if v is not None)[:PODIUM]
        elif t is not None and (len(self.podium) < PODIUM or (t, key) < self.podium[-1]):
            bisect.insort(self.podium, (t, key))
            del self.podium[PODIUM:]

    def best(self, k: int = 1) -> list[Key]:
        if k <= PODIUM:
            return [key for _, key in self.podium[:k]]
        valid = sorted((t, key) for key, t in self.results.items() if t is not None)
        return [key for _, key in valid[:k]]

    def cost(self, key: Key) -> float:
        """The time of a reported key; a failed configuration costs infinity."""
        t = self.results.get(key)
        return math.inf if t is None else t


@dataclass
class Pace:
    """What the budget still allows, as the tuner measures it (see ``Strategy.pace``)."""

    evaluated: int
    rate: float  # configurations per second so far
    configs_left: float  # configurations the rest of the budget allows at that rate (math.inf: unbounded)


class Strategy:
    """Base class: subclasses set ``name`` and ``summary`` and implement ``next_key``.

    ``keys`` is every valid configuration when the space was small enough to list, else None:
    then the strategy must work from ``space.sample``/``space.contains`` alone and never
    materialise the space.
    """

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""  # one line for --help and docs/TUNING_SPEC.md
    exhaustive: ClassVar[bool] = False  # given the time, visits every valid configuration

    def __init__(self, space: SearchSpace, keys: list[Key] | None, history: History, seed: int) -> None:
        self.space = space
        self.keys = keys
        self.history = history
        self.seed = seed
        self.rng = random.Random(f"{self.name}:{seed}")
        self._valid: set[Key] | None = None  # the listed keys as a set, built on first use
        self._shuffled: list[Key] | None = None
        self._cursor = 0
        self._sample_failed = False
        self._course = 0
        self._returned: list[Key] = []  # withdrawn proposals, unvisited again

    @classmethod
    def missing(cls) -> str | None:
        """What this strategy needs that is not installed (one line), or None."""
        return None

    # -- what the tuner calls ----------------------------------------------------------------

    def next_key(self) -> Key | None:
        """A valid configuration not proposed before, or None when the strategy has nothing left."""
        raise NotImplementedError

    def report(self, key: Key, time_ms: float | None) -> None:
        """A result arrived (``history`` already holds it); strategies with state update it here."""

    def pace(self, pace: Pace) -> str | None:
        """The measured rate and the budget left; a strategy may change course. Returns a log line if it did."""
        return None

    def label(self) -> str:
        """The strategy's name as the summary reports it (what actually happened)."""
        return self.name

    def urgency(self, key: Key) -> int | None:
        """How soon the strategy wants ``key``, a proposal in flight, measured: higher first.

        0 is routine (such proposals keep proposal order); None means no longer wanted: the
        tuner withdraws it if its compile has not started (``withdrawn``), else measures it
        after everything else. Asked when ``key`` is proposed and again for every proposal
        in flight each time ``course()`` changes, so it must be cheap (no model, no sort).
        """
        return 0

    def course(self) -> int:
        """Changes whenever ``urgency`` of the proposals in flight may have changed."""
        return self._course

    def withdrawn(self, key: Key) -> None:
        """The tuner took ``key`` back before compiling it: it was never measured and may be proposed again.

        ``history.proposed`` no longer holds it; a strategy that kept state about the proposal
        drops it here (and calls this base method, which makes the key unvisited again).
        """
        if self.keys is not None:  # an unlisted space samples around ``history.proposed``: nothing to keep
            self._returned.append(key)

    def exhausted(self) -> bool:
        if self.keys is not None:
            return len(self.history.proposed) >= len(self.keys)
        return self._sample_failed

    # -- helpers for subclasses --------------------------------------------------------------

    def valid(self, key: Key) -> bool:
        """Inside the restricted space (the listed keys when there are some, else the restrictions)."""
        if self.keys is not None:
            if self._valid is None:
                self._valid = set(self.keys)
            return key in self._valid
        return self.space.contains(key)

    def change_course(self) -> None:
        """Say that ``urgency`` answers may have changed (the tuner re-ranks its queue once per change)."""
        self._course += 1

    def returned_unvisited(self) -> Key | None:
        """A withdrawn proposal not proposed again since, or None (for strategies that walk a fixed order)."""
        while self._returned:
            key = self._returned.pop(0)
            if key not in self.history.proposed:
                return key
        return None

    def fresh(self, key: Key | None) -> bool:
        return key is not None and key not in self.history.proposed and self.valid(key)

    def random_unvisited(self) -> Key | None:
        """A uniformly random valid configuration not proposed yet (a seeded permutation when listed)."""
        if self.keys is not None:
            if self._shuffled is None:
                self._shuffled = list(self.keys)
                self.rng.shuffle(self._shuffled)
            while self._cursor < len(self._shuffled):
                key = self._shuffled[self._cursor]
                self._cursor += 1
                if key not in self.history.proposed:
                    return key
            return self.returned_unvisited()
        key = self.space.sample(self.rng, self.history.proposed)
        if key is None:
            self._sample_failed = True
        return key

    def indices(self, key: Key) -> list[int]:
        """The position of each value in its parameter's list (the coordinates strategies move in)."""
        return [values.index(v) for values, v in zip(self.space.values, key, strict=True)]

    def from_indices(self, idx: list[int]) -> Key:
        return tuple(values[i] for values, i in zip(self.space.values, idx, strict=True))

    def mutate(self, key: Key, rate: float, far: float = 0.2) -> Key:
        """Move each parameter with probability ``rate`` (at least one): one step, or anywhere with ``far``."""
        idx = self.indices(key)
        n = len(idx)
        chosen = [i for i in range(n) if self.rng.random() < rate and len(self.space.values[i]) > 1]
        if not chosen:
            movable = [i for i in range(n) if len(self.space.values[i]) > 1]
            if not movable:
                return key
            chosen = [self.rng.choice(movable)]
        for i in chosen:
            size = len(self.space.values[i])
            if self.rng.random() < far:
                idx[i] = self.rng.randrange(size)
            else:
                step = self.rng.choice((-1, 1))
                j = idx[i] + step
                idx[i] = j if 0 <= j < size else idx[i] - step
        return self.from_indices(idx)
