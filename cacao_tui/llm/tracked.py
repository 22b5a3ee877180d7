"""TrackedLLM: the one object the engine talks to.

It wraps a provider with what every call needs: a record/replay key, retries with
backoff, timeouts (one per attempt, one for the whole call), a concurrency limit, token
and cost totals, a budget cap, the per-model temperature, size caps on replies and on
the history sent back, redaction of secrets, the JSON record beside the iteration, and
a callback for the UI. ``chat`` returns what the model said; ``structured`` returns a
validated pydantic instance.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from cacao_tui.llm.bounds import cap_context, cap_reply
from cacao_tui.llm.errors import BudgetExceeded, LLMError, ProviderError, ReplayMismatch
from cacao_tui.llm.pricing import Price, cost_usd
from cacao_tui.llm.provider import ChatRequest, Provider
from cacao_tui.llm.recording import AttemptRecord, CallRecord, write_record
from cacao_tui.llm.redaction import known_secrets, redact, redact_data
from cacao_tui.llm.registry import Temperatures, temperature_for_call
from cacao_tui.llm.retry import RetryPolicy
from cacao_tui.llm.structured import StructuredOutputError, parse_structured, reask_message, schema_instructions
from cacao_tui.llm.types import CallContext, CallKey, ChatResponse, Message, ToolCall, ToolSpec
from cacao_tui.llm.usage import UsageTotals
from cacao_tui.settings import DEFAULTS
from cacao_tui.store.atomic import DiskFull

log = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)

DEFAULT_MAX_CONCURRENT = 8
DEFAULT_REASKS = 2
TRUNCATED_TOOL_CALL = (
    "your output was cut off at the output token limit, so these arguments may be incomplete; "
    "the tool was not run. Call it again with shorter arguments (e.g. write a large file in parts)."
)


@dataclass(frozen=True)
class RetryNotice:
    """Passed to ``on_retry`` before each wait: attempt ``attempt`` failed with ``error``."""

    key: CallKey
    provider: str
    attempt: int
    delay_s: float
    error: str
    status: int | None


OnCall = Callable[[CallRecord], None]
OnRetry = Callable[[RetryNotice], None]


class TrackedLLM:
    """Calls with retries, timeouts, a concurrency limit, usage totals, a budget and records.

    ``record_root`` is the run's output directory (None: record nothing). ``budget_usd``:
    once the run's cost reaches it, new calls raise BudgetExceeded (calls in flight
    finish). ``reasks`` bounds the extra calls ``structured`` and ``chat(require_tool=True)``
    make when a reply is unusable. ``timeout_s`` bounds one attempt, ``call_timeout_s``
    the whole call with its retries and waits (default: ``llm_call_timeout_factor`` times
    ``timeout_s``). ``temperatures``: None sends none (the server's default).
    Cancelling the task that awaits a call cancels the request in flight.
    """

    def __init__(
        self,
        provider: Provider,
        *,
        price: Price | None = None,
        temperatures: Temperatures | None = None,
        record_root: Path | None = None,
        budget_usd: float | None = None,
        on_call: OnCall | None = None,
        on_retry: OnRetry | None = None,
        retry: RetryPolicy | None = None,
        timeout_s: float | None = None,
        call_timeout_s: float | None = None,
        max_tokens: int | None = None,
        max_concurrent: int = DEFAULT_MAX_CONCURRENT,
        reasks: int = DEFAULT_REASKS,
        reply_text_cap: int | None = None,
        reply_cap: int | None = None,
        context_message_cap: int | None = None,
        context_total_cap: int | None = None,
    ) -> None:
        self._provider = provider
        self.price = price
        self.temperatures = temperatures
        self.record_root = Path(record_root) if record_root is not None else None
        self.budget_usd = budget_usd
        self.on_call = on_call
        self.on_retry = on_retry
        self.retry = retry or RetryPolicy()
        self.timeout_s = timeout_s if timeout_s is not None else DEFAULTS.llm_timeout_s
        self.call_timeout_s = (
            call_timeout_s if call_timeout_s is not None else DEFAULTS.llm_call_timeout_factor * self.timeout_s
        )
        self.reply_text_cap = reply_text_cap or DEFAULTS.llm_reply_text_chars
        self.reply_cap = reply_cap or DEFAULTS.llm_reply_max_chars
        self.context_message_cap = context_message_cap or DEFAULTS.llm_context_message_chars
        self.context_total_cap = context_total_cap or DEFAULTS.llm_context_total_chars
        self.max_tokens = max_tokens if max_tokens is not None else DEFAULTS.llm_max_tokens
        self.reasks = max(0, reasks)
        self.usage = UsageTotals()
        self._semaphore = asyncio.Semaphore(max(1, max_concurrent))
        self._counters: dict[tuple[str | None, int | None, str], int] = {}

    # -- what the engine reads -------------------------------------------------------

    @property
    def provider(self) -> str:
        return self._provider.name

    @property
    def model(self) -> str:
        return self._provider.model

    @property
    def priced(self) -> bool:
        """False when the model has no price: costs read 0 and the budget cannot bite."""
        return self.price is not None

    @property
    def spent_usd(self) -> float:
        return self.usage.run.cost_usd

    def budget_reached(self) -> bool:
        return self.budget_usd is not None and self.spent_usd >= self.budget_usd

    def next_key(self, ctx: CallContext) -> CallKey:
        group = (ctx.branch, ctx.iteration, ctx.node)
        index = self._counters.get(group, 0)
        self._counters[group] = index + 1
        return CallKey(ctx.branch, ctx.iteration, ctx.node, index)

    async def aclose(self) -> None:
        await self._provider.aclose()

    # -- calls --------------------------------------------------------------------------

    async def chat(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] | None = None,
        *,
        ctx: CallContext,
        system: str | None = None,
        max_tokens: int | None = None,
        require_tool: bool = False,
    ) -> ChatResponse:
        """One model turn. With ``require_tool`` a reply without a tool call is answered with
        a reminder, at most ``reasks`` times, then LLMError; the caller's history is not
        touched (append ``resp.to_message()`` yourself)."""
        tool_list = list(tools or [])
        response = await self._call(ctx, list(messages), tool_list, system, max_tokens, purpose="chat")
        if not require_tool or not tool_list:
            return response
        conversation = list(messages)
        for _ in range(self.reasks):
            if response.tool_calls:
                return response
            conversation += [response.to_message(), Message(role="user", content=_tool_reminder(tool_list, response))]
            response = await self._call(ctx, conversation, tool_list, system, max_tokens, purpose="reask")
        if response.tool_calls:
            return response
        names = ", ".join(t.name for t in tool_list)
        raise LLMError(
            f"{ctx.node}: the model replied {self.reasks + 1} times without calling a tool ({names}); "
            f"last reply: {_snippet(response.text) or '(empty)'}"
        )

    async def structured(
        self,
        messages: Sequence[Message],
        model: type[T],
        *,
        ctx: CallContext,
        system: str | None = None,
        max_tokens: int | None = None,
    ) -> T:
        """A validated ``model`` instance. An unusable reply (not JSON, wrong fields, cut
        off) is re-asked with the error, at most ``reasks`` times, then LLMError."""
        instructions = schema_instructions(model)
        full_system = f"{system}\n\n{instructions}" if system else instructions
        conversation = list(messages)
        error = ""
        for attempt in range(self.reasks + 1):
            purpose = "structured" if attempt == 0 else "reask"
            response = await self._call(
                ctx, conversation, [], full_system, max_tokens, purpose=purpose, json_output=True
            )
            try:
                return parse_structured(response.text, model)
            except StructuredOutputError as exc:
                error = str(exc)
            truncated = response.stop_reason == "max_tokens"
            conversation = [
                *conversation,
                response.to_message(),
                Message(role="user", content=reask_message(error, truncated=truncated)),
            ]
        raise LLMError(f"{ctx.node}: no valid {model.__name__} after {self.reasks + 1} replies: {error}")

    async def _call(
        self,
        ctx: CallContext,
        messages: list[Message],
        tools: list[ToolSpec],
        system: str | None,
        max_tokens: int | None,
        *,
        purpose: str,
        json_output: bool = False,
    ) -> ChatResponse:
        if self.budget_reached():
            raise BudgetExceeded(
                f"LLM budget reached: ${self.spent_usd:.4f} spent of ${self.budget_usd:.4f} "
                "(--budget-usd); no new calls"
            )
        key = self.next_key(ctx)
        secrets = known_secrets()
        sent = _outgoing(messages, secrets, self._caps())
        system = redact(system, secrets) if system else system
        request = ChatRequest(
            key=key,
            messages=sent,
            tools=tools,
            system=system,
            max_tokens=max_tokens or self.max_tokens,
            json_output=json_output,
            temperature=temperature_for_call(self.temperatures, ctx.node, structured=json_output),
        )
        record = CallRecord(
            branch=key.branch,
            iteration=key.iteration,
            node=key.node,
            index=key.index,
            purpose=purpose,
            provider=self.provider,
            model=self.model,
            system=system,
            messages=sent,
            tools=tools,
            max_tokens=request.max_tokens,
            temperature=request.temperature,
        )
        started = time.monotonic()
        # The call's clock starts when it first gets a slot: waiting behind other calls
        # (the concurrency limit) is not the provider's delay.
        deadline: float | None = None
        policy = self.retry
        final: LLMError = LLMError("no attempt was made")
        for attempt in range(max(0, policy.retries) + 1):
            attempt_started = time.time()
            t0: float | None = None
            limit = self.timeout_s
            try:
                async with self._semaphore:
                    t0 = time.monotonic()
                    if deadline is None:
                        deadline = t0 + self.call_timeout_s
                    limit = min(self.timeout_s, deadline - t0)
                    if limit <= 0:
                        raise TimeoutError
                    backstop = limit + min(5.0, 0.1 * limit)
                    response = await asyncio.wait_for(self._provider.complete(request), timeout=backstop)
            except ProviderError as exc:
                failure = self._timeout_error(limit, t0, deadline) if exc.kind == "timeout" else exc
            except TimeoutError:
                failure = self._timeout_error(limit, t0, deadline)
            except LLMError as exc:  # not retryable: replay mismatch, exhausted script, ...
                final = exc
                record.attempts.append(_attempt(attempt_started, t0, exc))
                break
            except Exception as exc:  # an SDK surprise: report it as one line, never a traceback
                final = LLMError(f"unexpected {type(exc).__name__}: {_snippet(redact(str(exc), secrets))}")
                record.attempts.append(_attempt(attempt_started, t0, final))
                break
            else:
                return self._succeed(record, response, time.monotonic() - (t0 or started), started, secrets)

            failure = _redacted_failure(failure, secrets)
            record.attempts.append(_attempt(attempt_started, t0, failure))
            if not failure.retryable or attempt == policy.retries:
                final = failure
                break
            wait = failure.retry_after_s
            if wait is not None and wait > policy.max_retry_after_s:
                final = ProviderError(
                    f"{failure} (the server asks to wait {wait:.0f} s; not waiting)", status=failure.status
                )
                break
            delay = wait if wait is not None else policy.backoff_s(attempt)
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0 or (wait is not None and wait >= left):
                    final = ProviderError(
                        f"{failure}; no time left for a retry within the call's limit of {self.call_timeout_s:g} s",
                        kind=failure.kind,
                        status=failure.status,
                    )
                    break
                delay = min(delay, left)  # the next attempt then gets what is left, if anything
            record.attempts[-1].delay_s = delay
            log.info("LLM %s call %s failed (%s); retry %d in %.1f s", self.provider, key, failure, attempt + 1, delay)
            self._notify_retry(RetryNotice(key, self.provider, attempt + 1, delay, str(failure), failure.status))
            await policy.sleep(delay)

        return self._fail(record, final, started)

    def _timeout_error(self, limit: float, t0: float | None, deadline: float | None) -> ProviderError:
        """One line that says which limit ran out and how to change it."""
        if limit <= 0 or (deadline is not None and limit < self.timeout_s and time.monotonic() >= deadline - 0.05):
            return ProviderError(
                f"no answer within the call's limit of {self.call_timeout_s:g} s "
                f"({DEFAULTS.llm_call_timeout_factor:g} x --llm-timeout, retries and waits included)",
                kind="timeout",
                retryable=False,
            )
        elapsed = time.monotonic() - t0 if t0 is not None else 0.0
        return ProviderError(
            f"no answer after {elapsed:.1f} s (limit {limit:g} s per attempt: --llm-timeout / CACAO_LLM_TIMEOUT)",
            kind="timeout",
            retryable=True,
        )

    def _caps(self) -> dict[str, int]:
        return {
            "message_cap": self.context_message_cap,
            "total_cap": self.context_total_cap,
            "newest_cap": self.reply_cap,
        }

    def _succeed(
        self, record: CallRecord, response: ChatResponse, latency_s: float, started: float, secrets: tuple[str, ...]
    ) -> ChatResponse:
        response, cut = cap_reply(response, text_cap=self.reply_text_cap, cap=self.reply_cap)
        if cut is not None:
            record.note = cut
            log.warning("LLM %s call %s: %s; cut to the cap", self.provider, record.key, cut)
        response = _redacted_response(response.model_copy(deep=True), secrets)
        response.latency_s = latency_s
        if not response.model:
            response.model = self.model
        if response.tool_calls and response.stop_reason == "max_tokens":
            response.tool_calls[-1].error = TRUNCATED_TOOL_CALL
        response.usage.cost_usd = cost_usd(response.usage, self.price)
        record.response = response
        record.usage = response.usage
        record.retries = len(record.attempts)
        record.latency_s = time.monotonic() - started
        self.usage.add(record.branch, record.iteration, record.node, response.usage, failed=False)
        self._save_and_notify(record)
        return response

    def _fail(self, record: CallRecord, error: LLMError, started: float) -> ChatResponse:
        attempts = len(record.attempts)
        tail = f" (gave up after {attempts} attempts)" if attempts > 1 else ""
        if isinstance(error, ReplayMismatch):
            final: LLMError = error
        else:
            final = LLMError(f"{self.provider} ({self.model}) call failed, {record.key}: {redact(str(error))}{tail}")
        record.error = str(final)
        record.retries = max(0, attempts - 1)
        record.latency_s = time.monotonic() - started
        self.usage.add(record.branch, record.iteration, record.node, None, failed=True)
        self._save_and_notify(record)
        final.record = record  # type: ignore[attr-defined]
        raise final

    def _save_and_notify(self, record: CallRecord) -> None:
        if self.record_root is not None:
            try:
                write_record(self.record_root, record)
            except DiskFull as exc:  # the run reports a full disk once and stops (store.atomic.on_disk_full)
                log.info("cannot record LLM call %s: %s", record.key, exc)
            except OSError as exc:
                log.error("cannot record LLM call %s: %s", record.key, exc)
        if self.on_call is not None:
            try:
                self.on_call(record)
            except Exception:
                log.exception("on_call callback failed for %s", record.key)

    def _notify_retry(self, notice: RetryNotice) -> None:
        if self.on_retry is not None:
            try:
                self.on_retry(notice)
            except Exception:
                log.exception("on_retry callback failed for %s", notice.key)


def _outgoing(messages: list[Message], secrets: tuple[str, ...], caps: dict[str, int]) -> list[Message]:
    """The conversation as sent and recorded: turns capped, secrets redacted from the text
    we send (tool results, prompts; a provider's signed data is left alone)."""
    out = []
    for m in cap_context(messages, **caps):
        content = redact(m.content, secrets)
        calls = m.tool_calls
        if calls:
            cleaned = [_redacted_call(c, secrets) for c in calls]
            calls = cleaned if any(a is not b for a, b in zip(cleaned, calls, strict=True)) else calls
        if content is not m.content or calls is not m.tool_calls:
            m = m.model_copy(update={"content": content, "tool_calls": calls})
        out.append(m)
    return out


def _redacted_call(call: ToolCall, secrets: tuple[str, ...]) -> ToolCall:
    arguments = redact_data(call.arguments, secrets)
    return call if arguments == call.arguments else call.model_copy(update={"arguments": arguments})


def _redacted_response(response: ChatResponse, secrets: tuple[str, ...]) -> ChatResponse:
    """What the engine gets back: text and tool arguments redacted (provider data, which
    may be signed, goes back to the provider as it came; the record redacts it too)."""
    response.text = redact(response.text, secrets)
    response.tool_calls = [_redacted_call(c, secrets) for c in response.tool_calls]
    return response


def _redacted_failure(failure: ProviderError, secrets: tuple[str, ...]) -> ProviderError:
    text = redact(str(failure), secrets)
    if text == str(failure):
        return failure
    return ProviderError(
        text,
        kind=failure.kind,
        status=failure.status,
        retryable=failure.retryable,
        retry_after_s=failure.retry_after_s,
    )


def _attempt(started_at: float, t0: float | None, error: LLMError) -> AttemptRecord:
    latency = time.monotonic() - t0 if t0 is not None else 0.0
    if isinstance(error, ProviderError):
        return AttemptRecord(
            started_at=started_at,
            latency_s=latency,
            error=str(error),
            kind=error.kind,
            status=error.status,
            retry_after_s=error.retry_after_s,
        )
    return AttemptRecord(started_at=started_at, latency_s=latency, error=str(error), kind="fatal")


def _tool_reminder(tools: list[ToolSpec], response: ChatResponse) -> str:
    names = ", ".join(t.name for t in tools)
    if response.stop_reason == "max_tokens":
        return (
            f"Your reply was cut off at the output token limit. Reply with a single tool call ({names}), "
            "keeping it short."
        )
    return f"You must call one of the tools ({names}) now. Reply with a tool call, not with text."


def _snippet(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "..."
