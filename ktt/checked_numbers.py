"""Numbers read back from files or an endpoint, kept to what is possible.

A run's files, a lock note and a provider's token counts are anyone's text: ``-5`` ms, ``1e308``
ms (a 309-digit label), ``Infinity`` dollars, a negative token count (which would give budget
back) or ``1e12`` seconds of GPU time (277,777,777 hours) are no results. These annotated types
are the bounds, applied where such a number is read (the pydantic models of the run's files,
the tuner's summaries, a call's usage), so nothing downstream has to check again:

- an optional measurement (``OptMillis``, ``OptRatio``, ``OptSeconds``, ``OptUsd``) that is not
  a finite number within its range reads as None: "no value", shown as ``-``;
- a required measurement (``Millis``) outside its range makes the record invalid (one line
  naming the file and field, like any other field of the wrong type);
- a count or an amount spent (``Count``, ``Usd``) is clamped into its range: a negative count is
  0, an enormous one the bound, so a budget can only run out sooner, never later.

A value of the wrong type (a string where a number belongs) is still a validation error.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import ValidatorFunctionWrapHandler, WrapValidator

MAX_MS = 1e8  # a kernel's time, a reference's: 27.8 hours
MAX_SECONDS = 1e6  # a tuning's wall time, a budget: 11.6 days
MAX_RATIO = 1e9  # a speedup, a score
MAX_USD = 1e9  # one call's cost, a run's
MAX_COUNT = 10**12  # tokens, calls, configurations


def _as_float(value: Any) -> float | None:
    """``value`` as a float when it is a number (a bool is not); None when no float holds it."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:
        return None


def within(value: Any, low: float, high: float, *, low_open: bool = False) -> float | None:
    """``value`` as a finite float in [low, high] (``low_open``: above low), else None."""
    number = _as_float(value)
    if number is None or not math.isfinite(number):
        return None
    if number < low or (low_open and number == low) or number > high:
        return None
    return number


def _optional(low: float, high: float, *, low_open: bool = False) -> Callable[..., float | None]:
    def check(value: Any, handler: ValidatorFunctionWrapHandler) -> float | None:
        if value is None:
            return None
        if isinstance(value, int | float) and not isinstance(value, bool):
            return within(value, low, high, low_open=low_open)
        parsed = handler(value)  # a numeric string is a number to pydantic; anything else its error
        return None if parsed is None else within(parsed, low, high, low_open=low_open)

    return check


def _required(low: float, high: float, what: str) -> Callable[..., float]:
    def check(value: Any, handler: ValidatorFunctionWrapHandler) -> float:
        number = handler(value) if not isinstance(value, int) or isinstance(value, bool) else _as_float(value)
        kept = within(number, low, high)
        if kept is None:
            raise ValueError(f"{what} must be a number from {low:g} to {high:g}")
        return kept

    return check


def _clamped_float(high: float) -> Callable[..., float]:
    def check(value: Any, handler: ValidatorFunctionWrapHandler) -> float:
        number = _as_float(value) if isinstance(value, int | float) and not isinstance(value, bool) else handler(value)
        if number is None or math.isnan(number):
            return 0.0
        return min(max(number, 0.0), high)

    return check


def clamp_count(value: Any) -> int:
    """A count from a file or an endpoint: an integer in [0, MAX_COUNT] (anything else is 0)."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, float):
        if not math.isfinite(value):
            return MAX_COUNT if value > 0 else 0
        value = int(value)
    if not isinstance(value, int):
        return 0
    return min(max(value, 0), MAX_COUNT)


def _count(value: Any, handler: ValidatorFunctionWrapHandler) -> int:
    if value is None or isinstance(value, int | float):
        return clamp_count(value)
    return clamp_count(handler(value))


Millis = Annotated[float, WrapValidator(_required(0.0, MAX_MS, "a time in ms"))]
OptMillis = Annotated[float | None, WrapValidator(_optional(0.0, MAX_MS))]
OptMicros = Annotated[float | None, WrapValidator(_optional(0.0, MAX_MS * 1000))]
OptSeconds = Annotated[float | None, WrapValidator(_optional(0.0, MAX_SECONDS))]
OptRatio = Annotated[float | None, WrapValidator(_optional(0.0, MAX_RATIO, low_open=True))]
OptUsd = Annotated[float | None, WrapValidator(_optional(0.0, MAX_USD))]
Usd = Annotated[float, WrapValidator(_clamped_float(MAX_USD))]
Count = Annotated[int, WrapValidator(_count)]
