"""Which validated elements differ from the reference, and how: a few (index, expected, got).

The GPU checks (ktt.gpu_checks) count the bad elements and find the first one without
reading the output back; when a comparison fails, the worker reads back a bounded window
from the first bad index and this picks the first few mismatches in it, so a model fixing
its kernel sees what it wrote where (a zero where a sum belonged, a neighbour's value, NaN).
"""

from __future__ import annotations

import math

import numpy as np

from ktt.protocol import Mismatch

WINDOW = 1 << 20  # elements read back from the first bad index (4 MiB of float)
MAX_SAMPLES = 8


def _value(v: float | int) -> float | int | None:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def first_mismatches(
    expected: np.ndarray, got: np.ndarray, offset: int, tolerance: float, limit: int = MAX_SAMPLES, rtol: float = 0.0
) -> list[Mismatch]:
    """Up to ``limit`` elements where ``got`` differs from ``expected`` beyond ``tolerance`` +
    ``rtol`` * |expected| (NaN and Inf never match); ``offset`` is the index of the arrays' first element."""
    n = min(expected.size, got.size)
    e, g = expected[:n], got[:n]
    if np.issubdtype(g.dtype, np.floating):
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(g.astype(np.float64) - e.astype(np.float64))
            bad = ~(np.isfinite(g) & (diff <= tolerance + rtol * np.abs(e.astype(np.float64))))
    else:
        bad = np.abs(g.astype(np.int64) - e.astype(np.int64)) > tolerance
    out = []
    for i in np.flatnonzero(bad)[:limit]:
        out.append(Mismatch(index=offset + int(i), expected=_value(e[i].item()), got=_value(g[i].item())))
    return out


def describe(samples: list[Mismatch]) -> str:
    """'[17] expected 1.5 got 0; [18] ...' for tool results and tuner lines."""

    def show(v: float | int | None) -> str:
        return "NaN/Inf" if v is None else f"{v:.6g}" if isinstance(v, float) else str(v)

    return "; ".join(f"[{m.index}] expected {show(m.expected)} got {show(m.got)}" for m in samples)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays hold the same bytes (NaN equals NaN, -0.0 differs from 0.0)."""
    return a.nbytes == b.nbytes and bool(np.array_equal(a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8)))


def unchanged_output_warning(name: str, access: str) -> str:
    """The warning for a validated output whose reference result is its init data in every input set:
    a kernel that writes nothing there passes validation, under the init contract (EVALUATION.md)."""
    fix = (
        "set validation.poison_outputs: true in problem.yaml to catch it"
        if access == "write"
        else "give it init data that the reference changes to catch it"
    )
    return (
        f"{name}: the reference leaves this output equal to its init data, so validation cannot tell a kernel "
        f"that writes nothing from a right one; {fix}"
    )
