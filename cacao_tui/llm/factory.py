"""Build the TrackedLLM for a ProviderChoice. Each SDK is imported only here, only for
the provider chosen, so replay and headless GPU boxes run without the others."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

from cacao_tui.llm.errors import LLMError
from cacao_tui.llm.models_table import price_for
from cacao_tui.llm.provider import Provider
from cacao_tui.llm.retry import RetryPolicy
from cacao_tui.llm.selection import ProviderChoice
from cacao_tui.llm.tracked import DEFAULT_MAX_CONCURRENT, DEFAULT_REASKS, OnCall, OnRetry, TrackedLLM
from cacao_tui.settings import DEFAULTS

log = logging.getLogger(__name__)


def build_provider(
    choice: ProviderChoice,
    *,
    replay_from: Path | None = None,
    timeout_s: float | None = None,
    env: Mapping[str, str] | None = None,
) -> Provider:
    env = os.environ if env is None else env
    timeout = timeout_s if timeout_s is not None else DEFAULTS.llm_timeout_s
    key = env.get(choice.key_var) if choice.key_var else None
    try:
        if choice.provider == "replay":
            from cacao_tui.llm.replay import ReplayProvider

            if replay_from is None:
                raise LLMError(
                    "--provider replay needs a recording: pass --from PATH (a run's output/ or a session .jsonl)"
                )
            model = None if choice.model == "replay" else choice.model
            return ReplayProvider(Path(replay_from), model=model)
        if choice.provider == "anthropic":
            from cacao_tui.llm.anthropic_adapter import AnthropicProvider

            return AnthropicProvider(
                choice.model, api_key=_need(key, choice), base_url=choice.base_url, timeout_s=timeout
            )
        if choice.provider in ("openai", "cerit"):
            from cacao_tui.llm.openai_adapter import OpenAIProvider

            if choice.provider == "cerit" and not choice.base_url:
                raise LLMError("--provider cerit needs CERIT_API_BASE (the endpoint URL)")
            return OpenAIProvider(
                choice.model,
                api_key=key if choice.provider == "openai" else _need(key, choice),
                base_url=choice.base_url,
                timeout_s=timeout,
                name=choice.provider,
                key_var=choice.key_var or ("CERIT_API_KEY" if choice.provider == "cerit" else "OPENAI_API_KEY"),
            )
        if choice.provider == "gemini":
            from cacao_tui.llm.gemini_adapter import GeminiProvider

            return GeminiProvider(choice.model, api_key=_need(key, choice), base_url=choice.base_url, timeout_s=timeout)
    except ImportError as exc:
        raise LLMError(f"the {choice.provider} provider needs its SDK, which is not installed ({exc.name})") from None
    raise LLMError(f"unknown LLM provider {choice.provider!r}")


def _need(key: str | None, choice: ProviderChoice) -> str:
    if not key:
        raise LLMError(
            f"{choice.provider} needs {choice.key_var or 'an API key'}; set it in the environment or a .env file"
        )
    return key


def create_llm(
    choice: ProviderChoice,
    *,
    record_root: Path | None = None,
    budget_usd: float | None = None,
    replay_from: Path | None = None,
    on_call: OnCall | None = None,
    on_retry: OnRetry | None = None,
    retry: RetryPolicy | None = None,
    timeout_s: float | None = None,
    max_tokens: int | None = None,
    max_concurrent: int = DEFAULT_MAX_CONCURRENT,
    reasks: int = DEFAULT_REASKS,
    env: Mapping[str, str] | None = None,
) -> TrackedLLM:
    """The TrackedLLM for ``choice``; LLMError (one line) when it cannot be built.

    ``record_root``: the run's output directory (calls are recorded beneath it).
    ``replay_from``: for provider ``replay``, a run's output directory or a session file.
    """
    provider = build_provider(choice, replay_from=replay_from, timeout_s=timeout_s, env=env)
    price = price_for(choice.provider, provider.model)
    if budget_usd is not None and price is None and choice.provider not in ("replay", "cerit"):
        log.warning(
            "no price for %s model %s: costs count as 0 and --budget-usd cannot stop the run",
            choice.provider,
            provider.model,
        )
    return TrackedLLM(
        provider,
        price=price,
        record_root=record_root,
        budget_usd=budget_usd,
        on_call=on_call,
        on_retry=on_retry,
        retry=retry,
        timeout_s=timeout_s,
        max_tokens=max_tokens,
        max_concurrent=max_concurrent,
        reasks=reasks,
    )
