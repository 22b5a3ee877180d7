"""The LLM time limit of a run: ``--llm-timeout``, else ``CACAO_LLM_TIMEOUT``, else the default.

The value bounds one attempt of a call (connect, send, the whole reply); the whole call,
retries and waits included, is bounded by ``DEFAULTS.llm_call_timeout_factor`` times it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

from cacao_tui.llm.errors import LLMError
from cacao_tui.settings import DEFAULTS

LLM_TIMEOUT_ENV = "CACAO_LLM_TIMEOUT"
MAX_LLM_TIMEOUT_S = 24 * 3600.0


def llm_timeout_s(cli_seconds: float | None, env: Mapping[str, str] | None = None) -> float:
    """Seconds per attempt; LLMError (one line) for an unusable ``CACAO_LLM_TIMEOUT``.
    Pass ``env=llm_environment(...).values`` so a .env file can set it."""
    if cli_seconds is not None:
        return _checked(cli_seconds, "--llm-timeout", str(cli_seconds))
    env = os.environ if env is None else env
    raw = (env.get(LLM_TIMEOUT_ENV) or "").strip()
    if not raw:
        return DEFAULTS.llm_timeout_s
    try:
        value = float(raw)
    except ValueError:
        raise LLMError(f"{LLM_TIMEOUT_ENV}={raw!r}: expected a number of seconds, e.g. 300") from None
    return _checked(value, LLM_TIMEOUT_ENV, raw)


def _checked(value: float, source: str, raw: str) -> float:
    if not math.isfinite(value) or value <= 0 or value > MAX_LLM_TIMEOUT_S:
        raise LLMError(f"{source}={raw!r}: expected seconds between 0 and {MAX_LLM_TIMEOUT_S:g}")
    return value
