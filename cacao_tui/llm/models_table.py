"""The one model table: each provider's default model and prices per million tokens.

Prices are USD per 1M tokens from the providers' published price lists (checked while
writing this table; verify before trusting a bill). Long-context surcharges are not
modelled. A model missing here costs 0 and a warning says the budget cannot be
enforced for it. CERIT and local OpenAI-compatible servers are free to us (no price).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cacao_tui.llm.types import Usage

DEFAULT_MODELS: dict[str, str] = {
    "cerit": "qwen3.5",
    "anthropic": "claude-sonnet-5-5",
    "openai": "gpt-6.1-sol",
    "gemini": "gemini-3.1-pro-preview",
    "replay": "replay",
}


@dataclass(frozen=True)
class Price:
    """USD per million tokens. ``cached_input`` is a cache read, ``cache_write`` a cache write."""

    input: float
    output: float
    cached_input: float
    cache_write: float | None = None


PRICES: dict[str, Price] = {
    # Anthropic: cache write = 5-minute write.
    "claude-sonnet-5-5": Price(2.00, 10.00, 0.20, 2.50),
    "claude-sonnet-5": Price(2.00, 10.00, 0.20, 2.50),
    "claude-opus-5-5": Price(4.00, 20.00, 0.20, 5.00),
    "claude-opus-5": Price(5.00, 25.00, 0.50, 6.25),
    "claude-opus-4-8": Price(5.00, 25.00, 0.50, 6.25),
    "claude-opus-4-7": Price(5.00, 25.00, 0.50, 6.25),
    "claude-opus-4-6": Price(5.00, 25.00, 0.50, 6.25),
    "claude-opus-4-5": Price(5.00, 25.00, 0.50, 6.25),
    "claude-sonnet-4-6": Price(3.00, 15.00, 0.30, 3.75),
    "claude-sonnet-4-5": Price(3.00, 15.00, 0.30, 3.75),
    "claude-haiku-4-5": Price(1.00, 5.00, 0.10, 1.25),
    # OpenAI (standard tier, short context).
    "gpt-6.1-sol": Price(2.00, 10.00, 0.10),
    "gpt-6-sol": Price(2.00, 10.00, 0.20),
    "gpt-6-luna": Price(0.10, 0.50, 0.01),
    "gpt-5.4": Price(2.50, 15.00, 0.25),
    "gpt-5.4-mini": Price(0.75, 4.50, 0.075),
    "gpt-5": Price(1.25, 10.00, 0.125),
    "gpt-5-mini": Price(0.25, 2.00, 0.025),
    # Gemini (prompts up to 200k tokens).
    "gemini-3.1-pro-preview": Price(2.00, 12.00, 0.20),
    "gemini-2.5-pro": Price(1.25, 10.00, 0.125),
    "gemini-2.5-flash": Price(0.30, 2.50, 0.03),
}

PRICED_PROVIDERS = frozenset({"anthropic", "openai", "gemini"})

_DATE_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")


def default_model(provider: str) -> str:
    return DEFAULT_MODELS[provider]


def price_for(provider: str, model: str) -> Price | None:
    """The price of ``model`` on ``provider``; dated snapshots share their alias's price."""
    if provider not in PRICED_PROVIDERS:
        return None
    name = model.strip().lower()
    if name.startswith("models/"):  # Gemini's resource-style names
        name = name.removeprefix("models/")
    return PRICES.get(name) or PRICES.get(_DATE_SUFFIX.sub("", name))


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
