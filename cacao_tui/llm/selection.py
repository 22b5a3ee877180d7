"""Which provider and model a run uses, and where that choice came from.

Order, highest first: ``--provider``; ``settings.PROVIDER``; ``LLM_PROVIDER`` from the
environment or a .env file; the first provider whose key is set, in the registry's
order (CERIT > Anthropic > OpenAI > Gemini). Names are case-insensitive and aliases
(``claude``, ``google``) count. As in the original, an ``LLM_PROVIDER`` that names no
provider is a warning and the keys decide, and a provider whose endpoint is required (CERIT)
is detected by that endpoint variable alone (``CERIT_API_BASE``); it then needs its key.
The model: ``--model``, else ``LLM_MODEL``, else the provider's default from the registry.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from cacao_tui.llm.errors import LLMError
from cacao_tui.llm.registry import (
    AUTO_DETECT_ORDER,
    BY_NAME,
    PROVIDER_NAMES,
    ProviderEntry,
    canonical_name,
    names_for_help,
)

ENV_HINT = "set it in the environment or in a .env file (problem dir, working dir, or ~/.config/cacao_tui/.env)"

__all__ = ["PROVIDER_NAMES", "ProviderChoice", "select_provider"]

_UNSET = object()


@dataclass(frozen=True)
class ProviderChoice:
    """The selected provider. ``source`` says which rule chose it (for the log and errors);
    ``key_var`` names the variable holding its key (None for replay or a keyless local
    server); ``base_url`` is the endpoint from the provider's variable, if set."""

    provider: str
    model: str
    source: str
    key_var: str | None = None
    base_url: str | None = None
    warnings: tuple[str, ...] = ()  # e.g. an LLM_PROVIDER that names no provider (ignored)

    def describe(self) -> str:
        where = f" at {self.base_url}" if self.base_url else ""
        return f"{self.provider} / {self.model}{where} (chosen by {self.source})"


def _get(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name)
    return value.strip() if value and value.strip() else None


def _key_var(spec: ProviderEntry, env: Mapping[str, str]) -> str | None:
    return next((v for v in spec.key_vars if _get(env, v)), None)


def _has_credentials(spec: ProviderEntry, env: Mapping[str, str]) -> bool:
    """Whether auto-detection picks ``spec``: its key, or its endpoint where that is required (CERIT,
    as the original detects it) or makes the key optional (a local OpenAI-compatible server)."""
    if _key_var(spec, env):
        return True
    by_base = spec.key_optional_with_base or spec.base_required
    return by_base and spec.base_var is not None and _get(env, spec.base_var) is not None


def _normalise(name: str, source: str) -> str:
    provider = canonical_name(name)
    if provider is None:
        raise LLMError(f"unknown LLM provider {name!r} ({source}); choose one of: {names_for_help()}")
    return provider


def _nothing_configured() -> LLMError:
    wanted = []
    for name in AUTO_DETECT_ORDER:
        spec = BY_NAME[name]
        text = " or ".join(spec.key_vars)
        if spec.base_required:
            text += f" (with {spec.base_var})"
        elif spec.key_optional_with_base:
            text += f" (or {spec.base_var} for a local server)"
        wanted.append(text)
    return LLMError(
        f"no LLM provider configured: set one of {', '.join(wanted)}; {ENV_HINT}; or run offline with --provider replay"
    )


def select_provider(
    cli_provider: str | None,
    cli_model: str | None,
    *,
    env: Mapping[str, str] | None = None,
    settings_provider: object = _UNSET,
) -> ProviderChoice:
    """Pick the provider and model; raise LLMError (one line, naming the variable to set)
    when the chosen provider has no key. Pass ``env=llm_environment(...).values`` so .env files count."""
    env = os.environ if env is None else env
    if settings_provider is _UNSET:
        from cacao_tui import settings

        settings_provider = settings.PROVIDER

    warnings: list[str] = []
    named = _get(env, "LLM_PROVIDER")
    if named and not cli_provider and canonical_name(named) is None:
        warnings.append(
            f"LLM_PROVIDER={named[:40]!r} names no provider ({names_for_help()}); ignored: the keys that are "
            "set choose one"
        )
        named = None
    if cli_provider:
        provider, source = _normalise(cli_provider, "--provider"), "--provider"
    elif isinstance(settings_provider, str) and settings_provider.strip():
        provider, source = _normalise(settings_provider, "settings.PROVIDER"), "settings.PROVIDER"
    elif named:
        provider, source = _normalise(named, "LLM_PROVIDER"), "LLM_PROVIDER"
    else:
        detected = next((p for p in AUTO_DETECT_ORDER if _has_credentials(BY_NAME[p], env)), None)
        if detected is None:
            raise _nothing_configured()
        provider = detected
        source = f"auto-detect ({_key_var(BY_NAME[detected], env) or BY_NAME[detected].base_var})"

    spec = BY_NAME[provider]
    chosen_by = f"{source}={provider}" if source != "--provider" else f"--provider {provider}"
    key_var = _key_var(spec, env)
    base_url = _get(env, spec.base_var) if spec.base_var else None
    if spec.key_vars and key_var is None and not (spec.key_optional_with_base and base_url):
        names = " or ".join(spec.key_vars)
        extra = f" (or {spec.base_var} for a local server that needs no key)" if spec.key_optional_with_base else ""
        raise LLMError(f"{chosen_by} needs {names}{extra}: {ENV_HINT}")
    if spec.base_required and base_url is None:
        raise LLMError(f"{chosen_by} needs {spec.base_var} (the endpoint URL, e.g. https://.../v1): {ENV_HINT}")

    model = (cli_model or "").strip() or _get(env, "LLM_MODEL")
    if not model:
        if spec.official_host and base_url and spec.official_host not in base_url:
            raise LLMError(
                f"{spec.base_var} points at {base_url}: name the model it serves with --model or LLM_MODEL "
                "(e.g. the name vLLM serves or an Ollama tag)"
            )
        model = spec.default_model
    return ProviderChoice(
        provider=provider, model=model, source=source, key_var=key_var, base_url=base_url, warnings=tuple(warnings)
    )
