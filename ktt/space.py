"""The search space: tune parameters, restrictions, and the configurations that satisfy them.

Enumeration is a depth-first walk over the parameters in declared order; each restriction
is checked as soon as every parameter it names is bound, so a branch that breaks one is
cut before its sub-product is built. A space of ten million raw combinations with tight
restrictions is walked in the time its valid part takes. Beyond ``limit`` valid
configurations the space is not listed: it is sampled (see ``sample``); when a random sample
already shows far more than that, the walk is skipped.

Both run under a time budget, since tuning.yaml is the model's: a space of 10^12
configurations whose restriction is always false would otherwise be walked for days.
When listing runs out of time the space is sampled instead; when nothing was listed and
random samples find nothing either, the space counts as empty and ``note`` says why.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ktt.expressions import Expression, ExpressionError, Number

ParamValue = int | float | str
Config = dict[str, ParamValue]
Key = tuple[ParamValue, ...]

# The budget in force (docs/SECURITY.md, "Bounds").
ENUMERATION_TIME_BUDGET_S = 5.0  # listing the valid configurations
SAMPLE_TIME_BUDGET_S = 2.0  # one call of ``sample``
PROBE_SAMPLES = 2_000  # random configurations tried when listing found none in time
ESTIMATE_SAMPLES = 1_000  # random configurations that estimate the valid count of a large product
ESTIMATE_TIME_BUDGET_S = 0.5  # at most this long (fewer samples, a wider margin)
_CLOCK_EVERY = 1024  # visits between two looks at the clock


class _OutOfTime(Exception):
    pass


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
        self.note: str | None = None  # why the space counts as empty or was not listed, if so

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

    def iter_valid(self, deadline: float | None = None) -> Iterator[Key]:
        """Every valid configuration, in declared (lexicographic) order, pruning early.

        With a ``deadline`` (time.monotonic()), raises ``_OutOfTime`` once it has passed.
        """
        if not self._constants_hold():
            return
        if not self.names:
            yield ()
            return
        env: dict[str, Number] = dict(self.constants)
        key: list[ParamValue] = [0] * len(self.names)
        depth_last = len(self.names) - 1
        visits = 0

        def walk(depth: int) -> Iterator[Key]:
            nonlocal visits
            name = self.names[depth]
            checks = self._checks_at[depth]
            for value in self.values[depth]:
                visits += 1
                if deadline is not None and visits % _CLOCK_EVERY == 0 and time.monotonic() > deadline:
                    raise _OutOfTime
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

    def enumerate(self, limit: int, time_budget_s: float = ENUMERATION_TIME_BUDGET_S) -> list[Key] | None:
        """All valid configurations, or None when there are more than ``limit`` (then the space is sampled).

        Listing stops after ``time_budget_s``: with some configurations found, the space is
        sampled (None); with none found, up to ``PROBE_SAMPLES`` random ones are tried, and if
        none is valid the space counts as empty (``[]``, with ``note`` saying so).
        """
        estimate = self._surely_more_than(limit)
        if estimate is not None:
            self.note = f"about {estimate:,} valid configurations (estimated from a sample); the space is sampled"
            return None
        out: list[Key] = []
        started = time.monotonic()
        try:
            for key in self.iter_valid(started + time_budget_s):
                out.append(key)
                if len(out) > limit:
                    return None
        except _OutOfTime:
            pass
        else:
            return out
        if out:
            self.note = f"listing stopped after {time_budget_s:g} s; the space is sampled"
            return None
        probe = self.sample(random.Random(0), set(), tries=PROBE_SAMPLES)
        if probe is not None:
            self.note = f"listing stopped after {time_budget_s:g} s; the space is sampled"
            return None
        self.note = (
            f"none found: listing {self.product_size():,} configurations stopped after {time_budget_s:g} s "
            f"without a valid one, and none of {PROBE_SAMPLES:,} random configurations satisfies the restrictions"
        )
        return []

    def _surely_more_than(self, limit: int, samples: int = ESTIMATE_SAMPLES) -> int | None:
        """The estimated valid count when a random sample shows it is well above ``limit``, else None.

        Listing such a space would walk ``limit`` configurations only to give up; a sample of
        ``samples`` (three standard errors below its estimate still above the limit) says so at once.
        """
        product = self.product_size()
        if product <= limit:
            return None
        rng = random.Random(0)
        deadline = time.monotonic() + ESTIMATE_TIME_BUDGET_S
        hits = drawn = 0
        while drawn < samples and (drawn % 64 or time.monotonic() < deadline):
            hits += self.contains(tuple(rng.choice(v) for v in self.values))
            drawn += 1
        frac = hits / drawn
        low = frac - 3 * math.sqrt(max(frac * (1 - frac), 1e-12) / drawn)
        return round(product * frac) if low * product > limit else None

    # -- sampling and neighbours ---------------------------------------------------

    def sample(
        self, rng: random.Random, exclude: set[Key], tries: int = 2000, time_budget_s: float = SAMPLE_TIME_BUDGET_S
    ) -> Key | None:
        """A random valid configuration not in ``exclude`` (rejection sampling), or None (also when out of time)."""
        deadline = time.monotonic() + time_budget_s
        for attempt in range(tries):
            if attempt % 64 == 63 and time.monotonic() > deadline:
                return None
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
