"""surrogate: model-based search, a tree-ensemble surrogate of log(time) ranks the candidates.

After ``INITIAL`` random configurations, an extremely randomised trees regressor
(scikit-learn's ExtraTreesRegressor) is fitted to the log of the measured times, with each
parameter's value position as a feature (so names and strings work too). Candidates come
from where good configurations are: neighbours of the best few, children (crossover and
mutation) of the best ``TOP``, and some random unvisited valid configurations, so the space
is never materialised. The model ranks them by a lower confidence bound, predicted mean
minus ``KAPPA`` times the trees' spread, and each fit proposes a batch of the best-ranked
(the tuner keeps many proposals in flight); some proposals stay random (``EXPLORE``).
Failed configurations are fitted as slower than the slowest, so the model learns to avoid
them. KAPPA is 0 (rank by the prediction; the exploration comes from the candidate pool
and ``EXPLORE``): on the recorded-table model of bench/large_space that reached the 2 % band
in 10 of 12 seeds, expected improvement over the same pool in 7 (docs/TUNING_SPEC.md).

In the compile queue the picks of the latest fit go first (urgency 1); picks of an earlier
fit and random proposals keep their order behind them (0).

Why trees and not a Gaussian process: tuning parameters are discrete and ordinal,
restrictions cut the space into irregular shapes and some configurations fail outright; tree
ensembles fit that without kernel choices, in milliseconds for thousands of points, and
scale linearly where a GP is cubic in the results (see docs/TUNING_SPEC.md, "Strategies").
"""

from __future__ import annotations

import math
from typing import Any

from ktt.space import Key, SearchSpace
from ktt.strategies.base import History, Strategy, StrategyUnavailable

INITIAL = 16
TOP = 8  # the configurations whose neighbours and children are candidates
TOP_NEIGHBOURS = 4
CHILDREN = 300
RANDOM = 50
MIN_BATCH = 8
EXPLORE = 0.1
TREES = 40
MAX_TRAIN = 1500
KAPPA = 0.0  # weight of the trees' spread in the ranking (0: the predicted mean alone)


def _require_sklearn() -> Any:
    try:
        from sklearn.ensemble import ExtraTreesRegressor
    except ImportError as exc:
        raise StrategyUnavailable(
            "strategy 'surrogate' needs scikit-learn: pip install 'cacao-tui[search]' (or scikit-learn>=1.3)"
        ) from exc
    return ExtraTreesRegressor


class Surrogate(Strategy):
    name = "surrogate"
    summary = "model-based: an extra-trees surrogate of log(time) (scikit-learn) ranks children of the best"

    @classmethod
    def missing(cls) -> str | None:
        try:
            _require_sklearn()
        except StrategyUnavailable as exc:
            return str(exc)
        return None

    def __init__(self, space: SearchSpace, keys: list[Key] | None, history: History, seed: int) -> None:
        super().__init__(space, keys, history, seed)
        self._model_cls = _require_sklearn()
        import numpy as np

        self.np = np
        self.queue: list[Key] = []
        self.picked: dict[Key, int] = {}  # a model's pick in flight -> the fit that ranked it
        self.fitted_at = -1  # results count at the last fit
        self.fits = 0
        self._scale = [max(1, len(v) - 1) for v in space.values]

    def features(self, keys: list[Key]) -> Any:
        rows = [[i / s for i, s in zip(self.indices(k), self._scale, strict=True)] for k in keys]
        return self.np.asarray(rows, dtype=float).reshape(len(keys), len(self._scale))

    def next_key(self) -> Key | None:
        n = len(self.history.results)
        if n < INITIAL or not self.history.best(1) or self.rng.random() < EXPLORE:
            return self.random_unvisited()
        if not self.queue or n - self.fitted_at >= max(MIN_BATCH, n // 8):
            self._refill(n)
        while self.queue:
            key = self.queue.pop()
            if self.fresh(key):
                self.picked[key] = self.fits
                return key
        return self.random_unvisited()

    def report(self, key: Key, time_ms: float | None) -> None:
        self.picked.pop(key, None)

    def urgency(self, key: Key) -> int | None:
        return 1 if self.picked.get(key) == self.fits else 0

    def withdrawn(self, key: Key) -> None:
        self.picked.pop(key, None)
        super().withdrawn(key)

    def _training_set(self) -> tuple[list[Key], list[float]]:
        order = self.history.order
        if len(order) > MAX_TRAIN:  # the best always, the rest a seeded subsample
            best = set(self.history.best(MAX_TRAIN // 4))
            rest = [k for k in order if k not in best]
            keep = list(best) + self.rng.sample(rest, MAX_TRAIN - len(best))
        else:
            keep = list(order)
        times = [self.history.results[k] for k in keep]
        ok = [math.log(t) for t in times if t is not None and t > 0]
        worst = max(ok) + math.log(2.0) if ok else 0.0
        y = [math.log(t) if t is not None and t > 0 else worst for t in times]
        return keep, y

    def _pool(self) -> list[Key]:
        """Candidates: neighbours and children of the best so far (where the good ones are) and random ones."""
        pool: set[Key] = set()
        top = self.history.best(TOP)
        rate = 1.0 / max(1, len(self.space.names))
        for center in top[:TOP_NEIGHBOURS]:
            pool.update(k for k in self.space.neighbours(center) if self.fresh(k))
        for _ in range(CHILDREN):
            a, b = self.rng.choice(top), self.rng.choice(top)
            child = tuple(x if self.rng.random() < 0.5 else y for x, y in zip(a, b, strict=True))
            child = self.mutate(child, rate, far=0.2)
            if self.fresh(child):
                pool.add(child)
        if self.keys is not None:
            for k in self.rng.sample(self.keys, min(len(self.keys), 2 * RANDOM)):
                if k not in self.history.proposed:
                    pool.add(k)
                    if len(pool) >= CHILDREN + RANDOM:
                        break
        else:
            seen = set(self.history.proposed)
            for _ in range(RANDOM):
                k = self.space.sample(self.rng, seen, tries=200)
                if k is None:
                    break
                seen.add(k)
                pool.add(k)
        return sorted(pool, key=self.indices)  # a fixed order: the model's ranking must not depend on set order

    def _refill(self, n: int) -> None:
        np = self.np
        keys, y = self._training_set()
        model = self._model_cls(n_estimators=TREES, random_state=self.rng.randrange(2**31), n_jobs=1)
        model.fit(self.features(keys), np.asarray(y))
        pool = self._pool()
        self.fitted_at = n
        self.fits += 1
        if self.picked:
            self.change_course()  # the earlier fits' picks in flight drop behind this one's
        if not pool:
            self.queue = []
            return
        x = self.features(pool)
        per_tree = np.stack([t.predict(x) for t in model.estimators_])
        bound = per_tree.mean(axis=0) - KAPPA * per_tree.std(axis=0)
        batch = max(MIN_BATCH, n // 8)
        top = np.argsort(bound, kind="stable")[:batch]
        self.queue = [pool[i] for i in reversed(top)]  # popped from the end: the best first
