"""What a call costs: a price per million tokens and the arithmetic of one call.

The prices themselves live in the provider registry (``registry.py``), one table per
provider, so a new provider brings its own. Long-context surcharges are not modelled.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cacao_tui.llm.types import Usage

_DATE_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")


@dataclass(frozen=True)
class Price:
    """USD per million tokens. ``cached_input`` is a cache read, ``cache_write`` a cache write."""

    input: float
    output: float
    cached_input: float
    cache_write: float | None = None


def price_keys(model: str) -> tuple[str, str]:
    """The names a model's price is looked up under: as given (lower case, without
    Gemini's ``models/`` prefix) and without a dated-snapshot suffix."""
    name = model.strip().lower().removeprefix("models/")
    return name, _DATE_SUFFIX.sub("", name)


def cost_usd(usage: Usage, price: Price | None) -> float:
    """Cost of one call: fresh input, cache reads, cache writes and output at their rates."""
    if price is None:
        return 0.0
    cached = min(usage.cached_tokens, usage.input_tokens)
    written = min(usage.cache_write_tokens, usage.input_tokens - cached)
    fresh = usage.input_tokens - cached - written
    write_rate = price.cache_write if price.cache_write is not None else price.input
    total = (
        fresh * price.input + cached * price.cached_input + written * write_rate + usage.output_tokens * price.output
    )
    return total / 1_000_000
