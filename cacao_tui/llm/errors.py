"""Errors of the LLM layer. Every message is one line a user can act on."""

from __future__ import annotations


class LLMError(Exception):
    """A call (or the setup of a provider) failed for good; the message says why."""


class BudgetExceeded(LLMError):
    """The --budget-usd cap is reached: no new calls are made."""


class ReplayMismatch(LLMError):
    """A replayed run asked for a call the recording does not hold."""


class ProviderError(LLMError):
    """One failed attempt, raised by an adapter; the tracked wrapper decides whether to retry.

    ``kind`` is ``http`` (the server answered with ``status``), ``timeout``,
    ``connection`` or ``response`` (an answer we could not use).
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str = "http",
        status: int | None = None,
        retryable: bool = False,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.retryable = retryable
        self.retry_after_s = retry_after_s
