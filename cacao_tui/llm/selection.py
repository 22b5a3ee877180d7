"""Which provider and model a run uses, and where that choice came from.

Order, highest first: ``--provider``; ``settings.PROVIDER``; ``LLM_PROVIDER`` from the
environment or a .env file; the first provider whose key is set, in the order
CERIT > Anthropic > OpenAI > Gemini. The model: ``--model``, else ``LLM_MODEL``, else
the provider's default from the model table.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from cacao_tui.llm.errors import LLMError
from cacao_tui.llm.models_table import default_model

ENV_HINT = "set it in the environment or in a .env file (problem dir, working dir, or ~/.config/cacao_tui/.env)"


@dataclass(frozen=True)
class ProviderSpec:
    name: str
    key_vars: tuple[str, ...]  # the first one set is used
    base_var: str | None  # the endpoint variable, honoured when set
    base_required: bool = False
    key_optional_with_base: bool = False  # local OpenAI-compatible servers need no key


PROVIDER_SPECS: dict[str, ProviderSpec] = {
    "cerit": ProviderSpec("cerit", ("CERIT_API_KEY",), "CERIT_API_BASE", base_required=True),
    "anthropic": ProviderSpec("anthropic", ("ANTHROPIC_API_KEY",), "ANTHROPIC_BASE_URL"),
    "openai": ProviderSpec("openai", ("OPENAI_API_KEY",), "OPENAI_BASE_URL", key_optional_with_base=True),
    "gemini": ProviderSpec("gemini", ("GEMINI_API_KEY", "GOOGLE_API_KEY"), "GOOGLE_GEMINI_BASE_URL"),
    "replay": ProviderSpec("replay", (), None),
}
AUTO_DETECT_ORDER = ("cerit", "anthropic", "openai", "gemini")
PROVIDER_NAMES = tuple(PROVIDER_SPECS)

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

    def describe(self) -> str:
        where = f" at {self.base_url}" if self.base_url else ""
        return f"{self.provider} / {self.model}{where} (chosen by {self.source})"


def _get(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name)
    return value.strip() if value and value.strip() else None


def _key_var(spec: ProviderSpec, env: Mapping[str, str]) -> str | None:
    return next((v for v in spec.key_vars if _get(env, v)), None)


def _has_credentials(spec: ProviderSpec, env: Mapping[str, str]) -> bool:
    if _key_var(spec, env):
        return True
    return spec.key_optional_with_base and spec.base_var is not None and _get(env, spec.base_var) is not None


def _normalise(name: str, source: str) -> str:
    provider = name.strip().lower()
    if provider not in PROVIDER_SPECS:
        raise LLMError(f"unknown LLM provider {name!r} ({source}); choose one of: {', '.join(PROVIDER_NAMES)}")
    return provider


def select_provider(
    cli_provider: str | None,
    cli_model: str | None,
    *,
    env: Mapping[str, str] | None = None,
    settings_provider: object = _UNSET,
) -> ProviderChoice:
    """Pick the provider and model; raise LLMError (one line, naming the variable to set)
    when the chosen provider has no key. Call ``load_env`` first so .env files count."""
    env = os.environ if env is None else env
    if settings_provider is _UNSET:
        from cacao_tui import settings

        settings_provider = settings.PROVIDER

    if cli_provider:
        provider, source = _normalise(cli_provider, "--provider"), "--provider"
    elif isinstance(settings_provider, str) and settings_provider.strip():
        provider, source = _normalise(settings_provider, "settings.PROVIDER"), "settings.PROVIDER"
    elif _get(env, "LLM_PROVIDER"):
        provider, source = _normalise(env["LLM_PROVIDER"], "LLM_PROVIDER"), "LLM_PROVIDER"
    else:
        detected = next((p for p in AUTO_DETECT_ORDER if _has_credentials(PROVIDER_SPECS[p], env)), None)
        if detected is None:
            raise LLMError(
                "no LLM provider configured: set one of CERIT_API_KEY (with CERIT_API_BASE), ANTHROPIC_API_KEY, "
                f"OPENAI_API_KEY (or OPENAI_BASE_URL for a local server), GEMINI_API_KEY; {ENV_HINT}; "
                "or run offline with --provider replay"
            )
        provider = detected
        source = f"auto-detect ({_key_var(PROVIDER_SPECS[detected], env) or PROVIDER_SPECS[detected].base_var})"

    spec = PROVIDER_SPECS[provider]
    chosen_by = f"{source}={provider}" if source != "--provider" else f"--provider {provider}"
    key_var = _key_var(spec, env)
    base_url = _get(env, spec.base_var) if spec.base_var else None
    if spec.key_vars and key_var is None and not (spec.key_optional_with_base and base_url):
        names = " or ".join(spec.key_vars)
        extra = " (or OPENAI_BASE_URL for a local server that needs no key)" if spec.key_optional_with_base else ""
        raise LLMError(f"{chosen_by} needs {names}{extra}: {ENV_HINT}")
    if spec.base_required and base_url is None:
        raise LLMError(f"{chosen_by} needs {spec.base_var} (the endpoint URL, e.g. https://.../v1): {ENV_HINT}")

    model = (cli_model or "").strip() or _get(env, "LLM_MODEL")
    if not model:
        if provider == "openai" and base_url and not _is_official_openai(base_url):
            raise LLMError(
                f"OPENAI_BASE_URL points at {base_url}: name the model it serves with --model or LLM_MODEL "
                "(e.g. the name vLLM serves or an Ollama tag)"
            )
        model = default_model(provider)
    return ProviderChoice(provider=provider, model=model, source=source, key_var=key_var, base_url=base_url)


def _is_official_openai(base_url: str) -> bool:
    return "api.openai.com" in base_url
