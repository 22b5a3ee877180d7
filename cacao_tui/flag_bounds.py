"""The bounds of every number a run takes: one table that the command line, the run dialog,
``cacao suite`` and the README's flag table read.

A number outside its bounds is a user mistake (one line, exit 2), not a run that never ends:
``--samples 100000`` would start a hundred thousand authoring calls per iteration, and
``--max-iter 99999999999999999999999`` a run that cannot finish. The highs are far beyond any
sensible run and far below what would hurt.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


class OutOfBounds(ValueError):
    """A number that is not one, or outside its bounds; ``str()`` says which, without the flag's name."""


@dataclass(frozen=True)
class Bound:
    flag: str  # the command line's name, "--max-iter"
    low: float
    high: float
    whole: bool = True  # a whole number; else any number
    low_open: bool = False  # the low end itself is refused: a positive number

    @property
    def dest(self) -> str:
        """The argparse destination, "max_iter"."""
        return self.flag.removeprefix("--").replace("-", "_")

    def span(self) -> str:
        """The bounds as --help and the README write them: "1–100", "over 0 to 86,400"."""
        if self.low_open:
            return f"over {_number(self.low)} to {_number(self.high)}"
        return f"{_number(self.low)}–{_number(self.high)}"

    def parse(self, text: str) -> int | float:
        """The number in ``text``, or OutOfBounds (the message names the bound it broke)."""
        raw = text.strip()
        if self.whole:
            try:
                value: int | float = int(raw)
            except ValueError:
                raise OutOfBounds(f"expected a whole number, got {raw!r}") from None
        else:
            try:
                value = float(raw)
            except ValueError:
                raise OutOfBounds(f"expected a number, got {raw!r}") from None
            if math.isnan(value):
                raise OutOfBounds(f"must be a positive number, got {raw!r}")
        if self.low_open and not value > self.low:
            raise OutOfBounds(f"must be a positive number, got {raw!r}")
        if value < self.low:
            raise OutOfBounds(f"must be at least {_number(self.low)}, got {value}")
        if value > self.high:
            shown = raw if len(raw) <= 40 else raw[:37] + "..."
            raise OutOfBounds(f"must be at most {_number(self.high)}, got {shown}")
        return value

    def argparse_type(self) -> Callable[[str], int | float]:
        """The parser's ``type=``: argparse turns the error into ``argument --flag: ...``."""

        def parse(text: str) -> int | float:
            try:
                return self.parse(text)
            except OutOfBounds as exc:
                raise argparse.ArgumentTypeError(str(exc)) from None

        parse.__name__ = self.dest
        return parse


GPU_ORDINAL = Bound("--gpus", 0, 63)  # each device ordinal of a list (a machine has at most a few)

BOUNDS: tuple[Bound, ...] = (
    Bound("--max-iter", 1, 100),
    Bound("--max-depth", 1, 5),
    Bound("--path-budget", 0, 1_000),
    Bound("--budget-iters", 1, 10_000),
    Bound("--strategies", 1, 16),
    Bound("--samples", 1, 16),
    Bound("--timeout", 0, 86_400, whole=False, low_open=True),  # a day of tuning per case
    Bound("--budget-usd", 0, 100_000, whole=False, low_open=True),
    Bound("--budget-tokens", 1, 10_000_000_000),
    Bound("--max-tokens", 1, 1_000_000),
    Bound("--llm-concurrency", 1, 64),
    Bound("--llm-timeout", 0, 3_600, whole=False, low_open=True),
    GPU_ORDINAL,
    Bound("--revert", 1, 10_000),  # an iteration number (steering)
    Bound("--jobs", 1, 256),  # cacao suite: runs at once
)
BY_FLAG = {b.flag: b for b in BOUNDS}
BY_DEST = {b.dest: b for b in BOUNDS}


def bound(flag: str) -> Bound:
    return BY_FLAG[flag]


def readme_row() -> str:
    """The README flag table's row of bounds (tests/docs keep the README equal to it)."""
    spans = "; ".join(f"`{b.flag}` {b.span()}" for b in BOUNDS if b is not GPU_ORDINAL)
    return (
        f"| bounds | every number a flag or the run dialog takes is bounded (outside its bounds: one line and "
        f"exit 2, before anything runs): {spans}; each GPU of `--gpus` {GPU_ORDINAL.span()} |"
    )
