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
    """Exponential backoff: ``base_delay_s * 2**n`` (capped at ``max_delay_s``) plus up to
    ``jitter * base_delay_s`` of random jitter, where n counts the retries so far (2, 4, 8,
    16, 32, 60, 60 ... s by default).

    A server's Retry-After replaces the computed delay when it is at most
    ``max_retry_after_s``. A longer one (CERIT answers ``max_parallel_requests`` 429s with
    the next hourly reset, ~3600 s, although a slot frees within seconds) is not waited
    out: the call goes on with the capped backoff instead, up to its deadline. Rate limits
    (429) are retried until the call's deadline, at most ``rate_limit_retries`` times;
    other retryable failures ``retries`` times. Tests pass a small ``base_delay_s`` or
    their own ``sleep``.
    """

    retries: int = DEFAULTS.llm_retries
    base_delay_s: float = 2.0
    max_delay_s: float = 60.0
    jitter: float = 0.5
    max_retry_after_s: float = 60.0
    rate_limit_retries: int = 100
    sleep: Callable[[float], Awaitable[None]] = field(default=asyncio.sleep, compare=False, repr=False)

    def backoff_s(self, retry_number: int) -> float:
        base = min(self.base_delay_s * (2 ** min(retry_number, 30)), self.max_delay_s)
        return base + random.uniform(0.0, self.jitter * self.base_delay_s)

    def may_retry(self, retries_so_far: int, status: int | None) -> bool:
        limit = self.rate_limit_retries if status == 429 else self.retries
        return retries_so_far < max(0, limit)

    def delay_s(self, retries_so_far: int, retry_after_s: float | None) -> tuple[float, str | None]:
        """The wait before the next attempt, and a note when the server's ask was not followed."""
        if retry_after_s is not None and retry_after_s <= self.max_retry_after_s:
            return retry_after_s, None
        delay = self.backoff_s(retries_so_far)
        if retry_after_s is None:
            return delay, None
        return delay, f"the server asked to wait {retry_after_s:.0f} s; retrying after {delay:.1f} s (capped backoff)"
