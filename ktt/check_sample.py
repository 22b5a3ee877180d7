"""Which configurations ``ktt check`` compiles: the extremes of the space, a random sample, the requested.

A random sample of four misses the configuration that spills or does not fit: the one with
the largest tiles. So the sample always holds the extremes, judged before compiling: the
configurations with the largest and the smallest tune-parameter values (registers and static
shared memory grow with tile sizes, unroll factors and items per thread) and those that ask
for the most and the least dynamic shared memory (the launches' ``shared_mem``). After the
compile, the check's report names the most and the least register-hungry of what it built.

A caller may also name configurations (``--configs``, the agent's check_compilation(configs));
each must be in the space: its parameters, one of their values, the restrictions.
"""

from __future__ import annotations

import math
import random

from ktt.candidates import launch_plan
from ktt.expressions import ExpressionError
from ktt.launch_program import iter_launches
from ktt.problem.model import Shape
from ktt.space import Key, SearchSpace
from ktt.spec import Config, TuningSpec

MAX_REQUESTED = 6  # configurations a caller may name in one check
WEIGHED = 5000  # configurations whose parameter values are compared (a sample of a larger space)
MEASURED = 600  # configurations whose launches are evaluated for their dynamic shared memory

LARGEST = "largest parameter values"
SMALLEST = "smallest parameter values"
MOST_SMEM = "most dynamic shared memory"
LEAST_SMEM = "least dynamic shared memory"


def _weight(key: Key) -> float:
    """How large a configuration's numeric values are, together (log scale: no overflow)."""
    return sum(math.log2(abs(v) + 1.0) for v in key if isinstance(v, int | float) and not isinstance(v, bool))


def dynamic_smem(spec: TuningSpec, space: SearchSpace, key: Key, shape: Shape) -> int | None:
    """The largest dynamic shared memory any launch of the configuration asks for (None: not evaluable)."""
    try:
        launches, _ = launch_plan(spec, space.config(key), shape)
    except (ExpressionError, ValueError, KeyError):
        return None
    return max((int(launch.get("smem") or 0) for launch in iter_launches(launches)), default=0)


def extreme_keys(
    space: SearchSpace, pool: list[Key], spec: TuningSpec, shape: Shape, rng: random.Random
) -> dict[str, Key]:
    """role -> configuration, for the extremes found in ``pool`` (the listed space, or a sample)."""
    if not pool:
        return {}
    weighed = pool if len(pool) <= WEIGHED else [pool[0], pool[-1], *rng.sample(pool, WEIGHED)]
    out: dict[str, Key] = {}
    if space.names:
        out[LARGEST] = max(weighed, key=lambda k: (_weight(k), k != pool[0]))
        out[SMALLEST] = min(weighed, key=_weight)
    if any(launch.shared_mem.names for launch in spec.kernel_launches()):
        measured = weighed
        if len(weighed) > MEASURED:
            measured = [out[LARGEST], out[SMALLEST], *rng.sample(weighed, MEASURED)]
        sizes = [(dynamic_smem(spec, space, k, shape), k) for k in measured]
        known = [(n, k) for n, k in sizes if n is not None]
        if known and max(n for n, _ in known) != min(n for n, _ in known):
            out[MOST_SMEM] = max(known, key=lambda nk: (nk[0], _weight(nk[1])))[1]
            out[LEAST_SMEM] = min(known, key=lambda nk: (nk[0], _weight(nk[1])))[1]
    return out


def _value(wanted: object, values: list) -> object:
    """The parameter's own value that ``wanted`` names (16, 16.0 and "16" name 16), else a miss."""
    for v in values:
        if (v == wanted and type(v) is not bool) or str(v) == str(wanted).strip():
            return v
    raise LookupError


def requested_keys(space: SearchSpace, configs: list[dict]) -> tuple[list[Key], list[str]]:
    """(the configurations named, one line per one that cannot be checked)."""
    keys: list[Key] = []
    errors: list[str] = []
    if len(configs) > MAX_REQUESTED:
        errors.append(f"{len(configs)} configurations named; the first {MAX_REQUESTED} are checked")
    for raw in configs[:MAX_REQUESTED]:
        if not isinstance(raw, dict):
            errors.append(f"{str(raw)[:80]}: a configuration is an object of parameter values")
            continue
        shown = ", ".join(f"{k}={v}" for k, v in raw.items())[:200]
        unknown = [k for k in raw if k not in space.names]
        if unknown:
            errors.append(f"{shown}: unknown parameter {unknown[0]!r} (parameters: {', '.join(space.names)})")
            continue
        missing = [n for n in space.names if n not in raw]
        if missing:
            errors.append(f"{shown}: no value for {', '.join(missing)} (every parameter needs one)")
            continue
        try:
            key = tuple(_value(raw[n], vs) for n, vs in zip(space.names, space.values, strict=True))
        except LookupError:
            bad = next(n for n, vs in zip(space.names, space.values, strict=True) if not _in(raw[n], vs))
            values = space.values[space.names.index(bad)]
            errors.append(f"{shown}: {bad}={raw[bad]} is not one of its values {values}")
            continue
        if not space.contains(key):
            errors.append(f"{shown}: excluded by the restrictions")
            continue
        if key not in keys:
            keys.append(key)
    return keys, errors


def _in(wanted: object, values: list) -> bool:
    try:
        _value(wanted, values)
    except LookupError:
        return False
    return True


CASE_ENUMERATION_LIMIT = 200_000
CASE_LISTING_S = 0.5  # per case: a larger or slower space is sampled and its size reported unknown


def case_config(
    spec: TuningSpec, chosen: list[Key], case: Shape, rng: random.Random
) -> tuple[Config | None, int | None]:
    """The configuration compiled for another case (its sizes change the restrictions), and how many
    configurations its space holds (None: too many to list).

    The first of ``chosen`` (the base shape's extremes first) that the case's restrictions allow,
    else one sampled from the case's own space; None when the case allows none (its tuning would
    find nothing valid).
    """
    space = SearchSpace(spec.tune_params, spec.restrictions, case.scalars)
    keys = space.enumerate(CASE_ENUMERATION_LIMIT, time_budget_s=CASE_LISTING_S)
    size = len(keys) if keys is not None else None
    pick = next((k for k in chosen if space.contains(k)), None)
    if pick is None and keys:
        pick = keys[0] if len(keys) == 1 else rng.choice(keys)
    elif pick is None and keys is None:  # a space too large to list is not empty: sampling's miss is time
        pick = space.sample(rng, set(), time_budget_s=0.2) or (chosen[0] if chosen else None)
    return (space.config(pick) if pick is not None else None), size
