"""Build the TrackedLLM for a ProviderChoice through the provider registry.

The registry entry names the adapter's ``create`` function; its module imports its SDK
only when ``create`` runs, so replay and headless GPU boxes run without the others.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from cacao_tui.llm.errors import LLMError
from cacao_tui.llm.progress import OnProgress
from cacao_tui.llm.provider import AdapterSetup, Provider
from cacao_tui.llm.registry import BY_NAME, model_info, price_for, temperatures_for
from cacao_tui.llm.retry import RetryPolicy
from cacao_tui.llm.selection import ProviderChoice
from cacao_tui.llm.tracked import DEFAULT_REASKS, OnCall, OnRetry, TrackedLLM
from cacao_tui.llm.user_config import LLMSettings
from cacao_tui.settings import DEFAULTS

log = logging.getLogger(__name__)


def build_provider(
    choice: ProviderChoice,
    *,
    replay_from: Path | None = None,
    timeout_s: float | None = None,
    env: Mapping[str, str] | None = None,
) -> Provider:
    """The adapter for ``choice``; LLMError (one line) when it cannot be built.
    ``timeout_s`` bounds one attempt (default: ``DEFAULTS.llm_timeout_s``)."""
    env = os.environ if env is None else env
    entry = BY_NAME.get(choice.provider)
    if entry is None:
        raise LLMError(f"unknown LLM provider {choice.provider!r}")
    timeout = timeout_s if timeout_s is not None else DEFAULTS.llm_timeout_s
    setup = AdapterSetup(
        entry=entry,
        api_key=env.get(choice.key_var) if choice.key_var else None,
        timeout_s=timeout,
        connect_timeout_s=min(DEFAULTS.llm_connect_timeout_s, timeout),
        replay_from=Path(replay_from) if replay_from is not None else None,
    )
    module_name, _, function = entry.factory.partition(":")
    try:
        create = getattr(importlib.import_module(module_name), function)
        return create(choice, setup)
    except ImportError as exc:
        sdk = entry.sdk or exc.name
        raise LLMError(f"the {entry.name} provider needs its SDK, which is not installed ({sdk})") from None


def create_llm(
    choice: ProviderChoice,
    *,
    record_root: Path | None = None,
    budget_usd: float | None = None,
    budget_tokens: int | None = None,
    replay_from: Path | None = None,
    on_call: OnCall | None = None,
    on_retry: OnRetry | None = None,
    on_progress: OnProgress | None = None,
    retry: RetryPolicy | None = None,
    timeout_s: float | None = None,
    call_timeout_s: float | None = None,
    max_tokens: int | None = None,
    max_concurrent: int | None = None,
    reasks: int = DEFAULT_REASKS,
    settings: LLMSettings | None = None,
    cache_scope: str = "",
    env: Mapping[str, str] | None = None,
) -> TrackedLLM:
    """The TrackedLLM for ``choice``; LLMError (one line) when it cannot be built.

    ``record_root``: the run's output directory (calls are recorded beneath it).
    ``replay_from``: for provider ``replay``, a run's output directory or a session file.
    ``timeout_s``: one attempt; ``call_timeout_s``: the whole call, retries included
    (default: ``DEFAULTS.llm_call_timeout_factor`` times ``timeout_s``). ``settings``:
    the user's llm.toml with the command line applied (effort and output limit per step,
    model entries and prices); ``max_concurrent`` and ``budget_tokens`` default to it.
    """
    settings = settings or LLMSettings()
    provider = build_provider(choice, replay_from=replay_from, timeout_s=timeout_s, env=env)
    # A replay's own price (what its recording is costed at); any other: the registry's.
    own = price_for(choice.provider, provider.model) or getattr(provider, "price", None)
    price = settings.price(choice.provider, provider.model, own)
    info = settings.model_info(choice.provider, provider.model, model_info(choice.provider, provider.model))
    if budget_usd is not None and price is None and BY_NAME[choice.provider].prices:
        log.warning(
            "no price for %s model %s: costs count as 0 and --budget-usd cannot stop the run "
            "(--budget-tokens can; or give it a price in llm.toml)",
            choice.provider,
            provider.model,
        )
    return TrackedLLM(
        provider,
        price=price,
        temperatures=temperatures_for(choice.provider, provider.model),
        record_root=record_root,
        budget_usd=budget_usd,
        budget_tokens=budget_tokens if budget_tokens is not None else settings.budget_tokens,
        on_call=on_call,
        on_retry=on_retry,
        on_progress=on_progress,
        retry=retry,
        timeout_s=timeout_s,
        call_timeout_s=call_timeout_s,
        max_tokens=max_tokens,
        max_concurrent=max_concurrent or settings.concurrency or DEFAULTS.llm_concurrency,
        reasks=reasks,
        info=info,
        settings=settings,
        cache_scope=cache_scope,
    )
