"""The provider registry: the one table every part of cacao reads about LLM providers.

Selection (names, aliases, key and endpoint variables, the auto-detect order), the CLI
(``--provider`` choices and ``--help``), pricing, temperatures, redaction (which
variables hold secrets) and docs/PROVIDERS.md all come from ``PROVIDERS`` below. A new
provider is one ``ProviderEntry`` here plus, if no existing adapter speaks its protocol,
one adapter module with a ``create(choice, setup)`` function (see ``factory.py``).

This module imports no SDK and nothing heavy, so ``cacao --help`` can read it.
``python -m cacao_tui.llm.provider_docs`` prints the tables docs/PROVIDERS.md carries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from cacao_tui.llm.models import ModelInfo
from cacao_tui.llm.pricing import Price, price_keys


@dataclass(frozen=True, eq=False)
class ProviderEntry:
    """One provider.

    ``key_vars``: the variables that may hold its key, the first one set is used.
    ``base_var``: the endpoint variable, honoured when set (``base_required``: must be).
    ``key_optional_with_base``: a server at a custom endpoint may need no key.
    ``official_host``: with an endpoint elsewhere the model must be named (the default
    model would not exist there). ``auto_detect``: takes part in key detection, in table
    order. ``factory``: ``module:function`` that builds the adapter; ``sdk``: the package
    that module imports. ``prices``: USD per million tokens by model name.
    ``takes_temperature``: False when the API (or the SDK pinned here) has no temperature
    parameter at all; ``no_temperature``: model-name prefixes (or ``*substring``, or
    ``=name`` for that name only) the API refuses a temperature for. Those calls go out
    without one (the model's default); so does a call that asks for reasoning (OpenAI
    refuses a temperature with a reasoning effort). ``models``: limits and controls by
    model name (exact, undated, or the longest name the model's starts with);
    ``model_defaults`` for every other model.
    """

    name: str
    title: str
    factory: str
    default_model: str
    aliases: tuple[str, ...] = ()
    key_vars: tuple[str, ...] = ()
    base_var: str | None = None
    base_required: bool = False
    key_optional_with_base: bool = False
    official_host: str | None = None
    auto_detect: bool = True
    sdk: str | None = None
    prices: Mapping[str, Price] = field(default_factory=dict)
    takes_temperature: bool = True
    no_temperature: tuple[str, ...] = ()
    models: Mapping[str, ModelInfo] = field(default_factory=dict)
    model_defaults: ModelInfo = field(default_factory=ModelInfo)

    def price(self, model: str) -> Price | None:
        exact, undated = price_keys(model)
        return self.prices.get(exact) or self.prices.get(undated)

    def model_info(self, model: str) -> ModelInfo:
        exact, undated = price_keys(model)
        found = self.models.get(exact) or self.models.get(undated)
        if found is not None:
            return found
        prefixes = [name for name in self.models if exact.startswith(name)]
        return self.models[max(prefixes, key=len)] if prefixes else self.model_defaults

    def sends_temperature(self, model: str) -> bool:
        if not self.takes_temperature:
            return False
        name = model.strip().lower()
        for rule in self.no_temperature:
            if rule.startswith("*") and rule[1:] in name:
                return False
            if rule.startswith("=") and name == rule[1:]:
                return False
            if not rule.startswith(("*", "=")) and name.startswith(rule):
                return False
        return True


_ANTHROPIC_PRICES = {
    # cache write = the 5-minute write
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
}
_OPENAI_PRICES = {
    # standard tier, short context
    "gpt-6.1-sol": Price(2.00, 10.00, 0.10),
    "gpt-6-sol": Price(2.00, 10.00, 0.20),
    "gpt-6-luna": Price(0.10, 0.50, 0.01),
    "gpt-5.4": Price(2.50, 15.00, 0.25),
    "gpt-5.4-mini": Price(0.75, 4.50, 0.075),
    "gpt-5": Price(1.25, 10.00, 0.125),
    "gpt-5-mini": Price(0.25, 2.00, 0.025),
}
_GEMINI_PRICES = {
    # prompts up to 200k tokens
    "gemini-3-pro": Price(2.00, 12.00, 0.20),
    "gemini-3.1-pro-preview": Price(2.00, 12.00, 0.20),
    "gemini-2.5-pro": Price(1.25, 10.00, 0.125),
    "gemini-2.5-flash": Price(0.30, 2.50, 0.03),
}

# Limits and controls. Context windows and output limits as the providers list them when
# the table was written; a user's llm.toml overrides any entry (docs/PROVIDERS.md).
_CLAUDE_45 = ModelInfo(200_000, 64_000, structured="tool", reasoning="budget", min_cache_tokens=1024)
_CLAUDE_ADAPTIVE = ModelInfo(200_000, 128_000, structured="tool", reasoning="effort", min_cache_tokens=1024)
_ANTHROPIC_MODELS = {
    "claude-sonnet-5-5": _CLAUDE_ADAPTIVE,
    "claude-sonnet-5": _CLAUDE_ADAPTIVE,
    "claude-opus-5": ModelInfo(200_000, 128_000, structured="tool", reasoning="effort", min_cache_tokens=4096),
    "claude-opus-4-8": ModelInfo(200_000, 128_000, structured="tool", reasoning="effort", min_cache_tokens=4096),
    "claude-opus-4-7": ModelInfo(200_000, 128_000, structured="tool", reasoning="effort", min_cache_tokens=4096),
    "claude-opus-4-6": ModelInfo(200_000, 128_000, structured="tool", reasoning="effort", min_cache_tokens=4096),
    "claude-opus-4-5": ModelInfo(200_000, 64_000, structured="tool", reasoning="budget", min_cache_tokens=4096),
    "claude-sonnet-4-6": _CLAUDE_ADAPTIVE,
    "claude-sonnet-4-5": _CLAUDE_45,
    "claude-haiku-4-5": ModelInfo(200_000, 64_000, structured="tool", reasoning="budget", min_cache_tokens=4096),
}
_GPT_REASONING = ModelInfo(400_000, 128_000, structured="native", reasoning="effort", reasons=True)
_GPT_ON_REQUEST = ModelInfo(400_000, 128_000, structured="native", reasoning="effort", reasons=False)
_OPENAI_MODELS = {
    "gpt-6": _GPT_REASONING,
    "gpt-5": _GPT_REASONING,  # gpt-5 itself, -mini, -nano: they reason by default
    "gpt-5.": _GPT_ON_REQUEST,  # gpt-5.1 and later: reasoning effort none unless asked
    "o3": _GPT_REASONING,
    "o4": _GPT_REASONING,
}
_GEMINI_MODELS = {
    "gemini-3": ModelInfo(
        1_048_576, 65_536, structured="native", reasoning="level", reasons=True, min_cache_tokens=4096
    ),
    "gemini-2.5-pro": ModelInfo(
        1_048_576, 65_536, structured="native", reasoning="budget", reasons=True, min_cache_tokens=4096
    ),
    "gemini-2.5-flash": ModelInfo(1_048_576, 65_536, structured="native", reasoning="budget", reasons=True),
}

# Table order is the auto-detect order: CERIT > Anthropic > OpenAI > Gemini, as in the original.
# Default models: the original's newest code's (config.py MODELS; CERIT's is glm-5.2 there).
PROVIDERS: tuple[ProviderEntry, ...] = (
    ProviderEntry(
        name="cerit",
        title="CERIT's OpenAI-compatible endpoint",
        factory="cacao_tui.llm.openai_adapter:create",
        default_model="glm-5.2",
        key_vars=("CERIT_API_KEY",),
        base_var="CERIT_API_BASE",
        base_required=True,
        sdk="openai",
        # vLLM behind it: json_schema response formats and reasoning_effort are understood.
        model_defaults=ModelInfo(131_072, 32_768, structured="native", reasoning="effort"),
    ),
    ProviderEntry(
        name="anthropic",
        title="Anthropic Messages API",
        factory="cacao_tui.llm.anthropic_adapter:create",
        default_model="claude-opus-4-6",
        aliases=("claude",),
        key_vars=("ANTHROPIC_API_KEY", "CLAUDE_API_KEY"),
        base_var="ANTHROPIC_BASE_URL",
        sdk="anthropic",
        prices=_ANTHROPIC_PRICES,
        models=_ANTHROPIC_MODELS,
        model_defaults=_CLAUDE_45,
        # The Messages API of the anthropic SDK pinned here (2.x) has no temperature parameter
        # (messages.create refuses one); the original's langchain-anthropic sent one.
        takes_temperature=False,
    ),
    ProviderEntry(
        name="openai",
        title="OpenAI Chat Completions, or any OpenAI-compatible server",
        factory="cacao_tui.llm.openai_adapter:create",
        default_model="gpt-5.4",
        key_vars=("OPENAI_API_KEY",),
        base_var="OPENAI_BASE_URL",
        key_optional_with_base=True,
        official_host="api.openai.com",
        sdk="openai",
        prices=_OPENAI_PRICES,
        models=_OPENAI_MODELS,
        # Also every local server (vLLM, Ollama, llama.cpp): a json_schema response format is
        # tried, and dropped for the run if the server refuses it.
        model_defaults=ModelInfo(131_072, 16_384, structured="native", reasoning="effort"),
        # Reasoning models accept only their default temperature (gpt-5 itself and its -mini/-nano,
        # the -pro models, gpt-6, the o-series); codex models none at all. gpt-5.1 and later reason
        # only when asked (reasoning effort none by default; --reasoning changes it, and then no
        # temperature is sent), so otherwise they take one, as the original sent it.
        no_temperature=("=gpt-5", "gpt-5-", "*-pro", "gpt-6", "o1", "o3", "o4", "*codex"),
    ),
    ProviderEntry(
        name="gemini",
        title="Gemini generateContent",
        factory="cacao_tui.llm.gemini_adapter:create",
        default_model="gemini-3-pro",
        aliases=("google",),
        key_vars=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
        base_var="GOOGLE_GEMINI_BASE_URL",
        sdk="google-genai",
        prices=_GEMINI_PRICES,
        models=_GEMINI_MODELS,
        model_defaults=ModelInfo(1_048_576, 65_536, structured="native", reasoning="budget", reasons=True),
    ),
    ProviderEntry(
        name="replay",
        title="a recorded run (no network, no key, no SDK)",
        factory="cacao_tui.llm.replay:create",
        default_model="replay",
        auto_detect=False,
        takes_temperature=False,
    ),
)

BY_NAME: dict[str, ProviderEntry] = {p.name: p for p in PROVIDERS}
ALIASES: dict[str, str] = {alias: p.name for p in PROVIDERS for alias in p.aliases}
PROVIDER_NAMES: tuple[str, ...] = tuple(BY_NAME)
AUTO_DETECT_ORDER: tuple[str, ...] = tuple(p.name for p in PROVIDERS if p.auto_detect)

# Variables that steer selection and never hold a secret (everything else read from a .env may).
SELECTION_VARS = ("LLM_PROVIDER", "LLM_MODEL")


# -- temperatures ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Temperatures:
    """``creative`` for free-text reasoning steps, ``precise`` for code, tools and JSON."""

    creative: float
    precise: float


# The original's per-model defaults, matched by substring of the model name, first match wins.
TEMPERATURE_FAMILIES: tuple[tuple[str, Temperatures], ...] = (
    ("qwen", Temperatures(1.0, 0.7)),
    ("deepseek", Temperatures(0.4, 0.0)),
    ("claude", Temperatures(0.3, 0.0)),
    ("kimi", Temperatures(1.0, 0.6)),
    ("glm", Temperatures(1.0, 0.7)),
)
DEFAULT_TEMPERATURES = Temperatures(0.3, 0.0)
# Steps whose output is prose (analysis, plans, proposals) use the creative temperature;
# structured output, the authoring tool loop and every other step the precise one.
CREATIVE_NODES = frozenset({"analyze", "plan", "propose"})


def temperatures_for(provider: str, model: str) -> Temperatures | None:
    """The temperatures for ``model`` on ``provider``; None when none is sent (replay, or a
    model that refuses one)."""
    entry = BY_NAME.get(provider)
    if entry is None or not entry.sends_temperature(model):
        return None
    name = model.lower()
    return next((t for family, t in TEMPERATURE_FAMILIES if family in name), DEFAULT_TEMPERATURES)


def temperature_for_call(temps: Temperatures | None, node: str, *, structured: bool) -> float | None:
    if temps is None:
        return None
    return temps.creative if node in CREATIVE_NODES and not structured else temps.precise


# -- lookups --------------------------------------------------------------------------------


def canonical_name(name: str) -> str | None:
    """``name`` (any case, an alias allowed) as a registry name; None when unknown."""
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    return key if key in BY_NAME else None


def price_for(provider: str, model: str) -> Price | None:
    """The price of ``model`` on ``provider``; dated snapshots share their alias's price."""
    found = BY_NAME.get(provider)
    return found.price(model) if found is not None else None


def model_info(provider: str, model: str) -> ModelInfo:
    """Limits and controls of ``model`` on ``provider`` (the provider's defaults when unknown)."""
    found = BY_NAME.get(provider)
    return found.model_info(model) if found is not None else ModelInfo()


def key_variables() -> tuple[str, ...]:
    """Every variable that may hold an API key, over all providers."""
    return tuple(v for p in PROVIDERS for v in p.key_vars)


def endpoint_variables() -> tuple[str, ...]:
    return tuple(p.base_var for p in PROVIDERS if p.base_var)


def names_for_help() -> str:
    """``cerit, anthropic, ... (aliases: claude = anthropic, ...)`` for --help and errors."""
    aliases = ", ".join(f"{alias} = {name}" for alias, name in ALIASES.items())
    return ", ".join(PROVIDER_NAMES) + (f" (aliases: {aliases})" if aliases else "")
