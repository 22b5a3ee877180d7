"""The registry of search strategies: one module each, one interface (``ktt.strategies.base.Strategy``).

The command line (``--strategy``, ``--help``), docs/TUNING_SPEC.md and the tuner read the
names and one-line summaries from ``REGISTRY``; add a strategy by writing its module and
listing its class here.
"""

from __future__ import annotations

from ktt.space import Key, SearchSpace
from ktt.strategies.annealing import Annealing
from ktt.strategies.auto import Auto
from ktt.strategies.base import History, Pace, Strategy, StrategyUnavailable
from ktt.strategies.exhaustive import Exhaustive
from ktt.strategies.genetic import Genetic
from ktt.strategies.random_local import RandomLocal
from ktt.strategies.random_sample import RandomSample
from ktt.strategies.surrogate import Surrogate

REGISTRY: dict[str, type[Strategy]] = {
    cls.name: cls for cls in (Auto, Exhaustive, RandomSample, RandomLocal, Genetic, Annealing, Surrogate)
}
DEFAULT = "auto"


def names() -> list[str]:
    return list(REGISTRY)


def help_text() -> str:
    """One line per strategy, for ``--help``."""
    return "; ".join(f"{name}: {cls.summary}" for name, cls in REGISTRY.items())


def unavailable(name: str) -> str | None:
    """Why the named strategy cannot run here (a missing optional package), or None."""
    cls = REGISTRY.get(name)
    return cls.missing() if cls is not None else None


def make(name: str, space: SearchSpace, keys: list[Key] | None, history: History, seed: int) -> Strategy:
    """The named strategy; ValueError for an unknown name, StrategyUnavailable when a package is missing."""
    cls = REGISTRY.get(name)
    if cls is None:
        raise ValueError(f"unknown strategy {name!r} (choose from {', '.join(REGISTRY)})")
    return cls(space, keys, history, seed)


__all__ = [
    "DEFAULT",
    "REGISTRY",
    "History",
    "Pace",
    "Strategy",
    "StrategyUnavailable",
    "help_text",
    "make",
    "names",
    "unavailable",
]
