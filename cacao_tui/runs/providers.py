"""Which providers a run of a problem could use, from the provider registry and the
environment the run would see (the app's environment plus the .env files it would load).

Only the names of the variables that are set are reported, never their values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cacao_tui.llm.env import llm_environment
from cacao_tui.llm.errors import LLMError
from cacao_tui.llm.registry import PROVIDERS
from cacao_tui.llm.selection import select_provider


@dataclass(frozen=True)
class ProviderStatus:
    name: str
    title: str
    default_model: str
    ready: bool  # select_provider would accept it
    note: str  # "key set (ANTHROPIC_API_KEY)", "needs OPENAI_API_KEY", "no key needed"


def run_environment(problem_dir: Path | None) -> dict[str, str]:
    """os.environ plus what the run's .env files may add (never overriding; os.environ untouched)."""
    return llm_environment(problem_dir).values


def provider_statuses(env: Mapping[str, str]) -> list[ProviderStatus]:
    rows = []
    for entry in PROVIDERS:
        set_var = next((v for v in entry.key_vars if (env.get(v) or "").strip()), None)
        try:
            select_provider(entry.name, None, env=env, settings_provider=None)
            ready, why = True, ""
        except LLMError as exc:
            ready, why = False, str(exc).split(": ", 1)[0]
        if not entry.key_vars:
            note = "no key needed"
        elif set_var:
            note = f"key set ({set_var})"
        else:
            note = f"needs {' or '.join(entry.key_vars)}"
        if not ready and why and set_var:
            note += f"; {why}"
        rows.append(ProviderStatus(entry.name, entry.title, entry.default_model, ready, note))
    return rows


def auto_choice(env: Mapping[str, str]) -> str:
    """What the run would pick with no --provider: 'anthropic / claude-…', or why none."""
    try:
        choice = select_provider(None, None, env=env)
    except LLMError:
        return "no provider has a key set"
    return f"{choice.provider} / {choice.model}"
