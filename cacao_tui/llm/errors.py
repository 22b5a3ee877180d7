"""Errors of the LLM layer. Every message is one line a user can act on."""

from __future__ import annotations


class LLMError(Exception):
    """A call (or the setup of a provider) failed for good; the message says why."""


class ReplayMismatch(LLMError):
    """A replayed run asked for a call the recording does not hold: for the branch asking, the
    recording has ended. ``key`` is the call's (branch, iteration, node, index), when known."""

    def __init__(self, message: str, *, key: object = None) -> None:
        super().__init__(message)
        self.key = key


class BudgetExceeded(LLMError):
    """The --budget-usd or --budget-tokens cap is reached: no new calls are made."""


class CallFailed(LLMError):
    """A call failed for good at the provider (after its retries): the endpoint, the key,
    the network. ``record`` is the call's record."""


class ReplyUnusable(LLMError):
    """The model answered, but not usably: a refusal, an empty reply, no valid JSON after
    the repair turn. Steps fall back (a rule-based decision, a default strategy) or fail
    as a step, never as the run. ``reason`` says what was wrong, ``text`` is the last reply."""

    def __init__(self, message: str, *, reason: str = "", text: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message
        self.text = text


class ProviderError(LLMError):
    """One failed attempt, raised by an adapter; the tracked wrapper decides whether to retry.

    ``kind`` is ``http`` (the server answered with ``status``), ``timeout``,
    ``connection``, ``response`` (an answer we could not use), ``context_length`` (the
    request did not fit the model's context window; ``context_window`` is the window the
    server named, if it did) or ``unsupported`` (the server refused an optional parameter,
    named in ``param``: ``structured``, ``reasoning`` or ``cache``).
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str = "http",
        status: int | None = None,
        retryable: bool = False,
        retry_after_s: float | None = None,
        param: str | None = None,
        context_window: int | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.retryable = retryable
        self.retry_after_s = retry_after_s
        self.param = param
        self.context_window = context_window


def error_location(loc: tuple[int | str, ...], top: str) -> str:
    """Where a pydantic validation error sits (``models.x.price``), or ``top`` for the whole value."""
    return ".".join(str(p) for p in loc) or top
