"""The search space: tune parameters, restrictions, and the configurations that satisfy them.

Enumeration is a depth-first walk over the parameters in declared order; each restriction
is checked as soon as every parameter it names is bound, so a branch that breaks one is
cut before its sub-product is built. A space of ten million raw combinations with tight
restrictions is walked in the time its valid part takes. Beyond ``limit`` valid
configurations the space is not listed: it is sampled (see ``sample``).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ktt.expressions import Expression, ExpressionError, Number

ParamValue = int | float | str
Config = dict[str, ParamValue]
Key = tuple[ParamValue, ...]


@dataclass(frozen=True)
class _Check:
    depth: int  # index of the last parameter the restriction names
    expr: Expression


class SearchSpace:
    def __init__(
        self,
        tune_params: dict[str, list[ParamValue]],
        restrictions: Sequence[Expression] = (),
        constants: dict[str, Number] | None = None,
    ) -> None:
        self.names: list[str] = list(tune_params)
        self.values: list[list[ParamValue]] = [list(v) for v in tune_params.values()]
        self.constants: dict[str, Number] = dict(constants or {})
        position = {n: i for i, n in enumerate(self.names)}
        checks_at: list[list[Expression]] = [[] for _ in self.names]
        self.constant_checks: list[Expression] = []
        for expr in restrictions:
            depths = [position[n] for n in expr.names if n in position]
            if depths:
                checks_at[max(depths)].append(expr)
            else:
                self.constant_checks.append(expr)
        self._checks_at = checks_at

    # -- basic facts ---------------------------------------------------------------

    def product_size(self) -> int:
        n = 1
        for v in self.values:
            n *= len(v)
        return n

    def key(self, config: Config) -> Key:
        return tuple(config[n] for n in self.names)

    def config(self, key: Key) -> Config:
        return dict(zip(self.names, key, strict=True))

    def _env(self, key: Sequence[ParamValue]) -> dict[str, Number]:
        env: dict[str, Number] = dict(self.constants)
        for name, value in zip(self.names, key, strict=False):
            if isinstance(value, (int, float)):
                env[name] = value
        return env

    @staticmethod
    def _holds(expr: Expression, env: dict[str, Number]) -> bool:
        try:
            return bool(expr.evaluate(env))
        except ExpressionError:
            return False  # a restriction that cannot be evaluated (division by zero...) excludes the config

    def _constants_hold(self) -> bool:
        env = dict(self.constants)
        return all(self._holds(e, env) for e in self.constant_checks)

    def contains(self, key: Key) -> bool:
        if len(key) != len(self.names):
            return False
        for values, v in zip(self.values, key, strict=True):
            if v not in values:
                return False
        if not self._constants_hold():
            return False
        env = self._env(key)
        return all(self._holds(e, env) for checks in self._checks_at for e in checks)

    # -- enumeration ---------------------------------------------------------------

    def iter_valid(self) -> Iterator[Key]:
        """Every valid configuration, in declared (lexicographic) order, pruning early."""
        if not self._constants_hold():
            return
        if not self.names:
            yield ()
            return
        env: dict[str, Number] = dict(self.constants)
        key: list[ParamValue] = [0] * len(self.names)
        depth_last = len(self.names) - 1

        def walk(depth: int) -> Iterator[Key]:
            name = self.names[depth]
            checks = self._checks_at[depth]
            for value in self.values[depth]:
                key[depth] = value
                if isinstance(value, (int, float)):
                    env[name] = value
                else:
                    env.pop(name, None)
                if checks and not all(self._holds(e, env) for e in checks):
                    continue
                if depth == depth_last:
                    yield tuple(key)
                else:
                    yield from walk(depth + 1)

        yield from walk(0)

    def enumerate(self, limit: int) -> list[Key] | None:
        """All valid configurations, or None when there are more than ``limit``."""
        out: list[Key] = []
        for key in self.iter_valid():
            out.append(key)
            if len(out) > limit:
                return None
        return out

    # -- sampling and neighbours ---------------------------------------------------

    def sample(self, rng: random.Random, exclude: set[Key], tries: int = 2000) -> Key | None:
        """A random valid configuration not in ``exclude`` (rejection sampling), or None."""
        for _ in range(tries):
            key = tuple(rng.choice(v) for v in self.values)
            if key not in exclude and self.contains(key):
                return key
        return None

    def neighbours(self, key: Key, distance: int = 1) -> list[Key]:
        """Valid configurations that change one parameter to a value at most ``distance`` steps away."""
        out: list[Key] = []
        for i, values in enumerate(self.values):
            try:
                at = values.index(key[i])
            except ValueError:
                continue
            for step in range(1, distance + 1):
                for j in (at - step, at + step):
                    if 0 <= j < len(values):
                        cand = (*key[:i], values[j], *key[i + 1 :])
                        if self.contains(cand):
                            out.append(cand)
        return out
