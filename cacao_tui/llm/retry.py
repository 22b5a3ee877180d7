"""When and how long to wait before trying a failed call again.

Ours are the only retries: every SDK client is built with its own retries off, so a
429 is not retried twice over and every attempt is recorded.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from cacao_tui.settings import DEFAULTS

# Request timeout, conflict, too early, rate limited, Anthropic's "overloaded"; every 5xx.
RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 529})


def is_retryable_status(status: int | None) -> bool:
    return status is not None and (status in RETRYABLE_STATUS or 500 <= status <= 599)


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Seconds the server asks us to wait: ``retry-after-ms``, else ``retry-after`` as
    seconds or as an HTTP date. None when absent or unreadable."""
    if not headers:
        return None
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    ms = lowered.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parsed = email.utils.parsedate_tz(value)
    if parsed is None:
        return None
    return max(0.0, email.utils.mktime_tz(parsed) - (time.time() if now is None else now))


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff: ``base_delay_s * 2**n`` plus up to ``jitter * base_delay_s`` of
    random jitter, where n counts the retries so far (2, 4, 8, 16, 32 s by default).

    A server's Retry-After replaces the computed delay; one longer than
    ``max_retry_after_s`` (a daily quota, say) ends the call at once with a clear error.
    Tests pass a small ``base_delay_s`` or their own ``sleep``.
    """

    retries: int = DEFAULTS.llm_retries
    base_delay_s: float = 2.0
    max_delay_s: float = 120.0
    jitter: float = 0.5
    max_retry_after_s: float = 300.0
    sleep: Callable[[float], Awaitable[None]] = field(default=asyncio.sleep, compare=False, repr=False)

    def backoff_s(self, retry_number: int) -> float:
        base = min(self.base_delay_s * (2**retry_number), self.max_delay_s)
        return base + random.uniform(0.0, self.jitter * self.base_delay_s)
