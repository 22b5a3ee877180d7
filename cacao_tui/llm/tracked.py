"""TrackedLLM: the one object the engine talks to.

It wraps a provider with what every call needs: a record/replay key, retries with
backoff, timeouts (one per attempt, one for the whole call), a concurrency limit, token
and cost totals, budget caps (dollars, tokens), the per-model temperature, the model's
limits and controls (context window and output limit, reasoning effort, structured
output), size caps on replies and on the history sent back, a context fitted in tokens,
redaction of secrets, the JSON record beside the iteration, progress while a reply
streams, and callbacks for the UI. ``chat`` returns what the model said; ``structured``
returns a validated pydantic instance or raises ``ReplyUnusable``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from cacao_tui.llm.bounds import cap_context, cap_reply
from cacao_tui.llm.context_fit import TokenEstimator, fit_messages, message_chars, request_chars
from cacao_tui.llm.errors import BudgetExceeded, CallFailed, LLMError, ProviderError, ReplayMismatch, ReplyUnusable
from cacao_tui.llm.models import ModelInfo
from cacao_tui.llm.pricing import Price, cost_usd
from cacao_tui.llm.progress import OnProgress, StreamMeter
from cacao_tui.llm.provider import ChatRequest, Provider
from cacao_tui.llm.recording import AttemptRecord, CallRecord, write_record
from cacao_tui.llm.redaction import known_secrets, redact, redact_data
from cacao_tui.llm.refusals import refusal_reason, restate
from cacao_tui.llm.registry import Temperatures, temperature_for_call
from cacao_tui.llm.retry import RetryPolicy
from cacao_tui.llm.structured import (
    StructuredOutputError,
    format_instructions,
    native_schema,
    parse_reply,
    reask_message,
    schema_instructions,
    schema_text,
    strip_reasoning,
)
from cacao_tui.llm.types import CallContext, CallKey, ChatResponse, Message, ToolCall, ToolSpec
from cacao_tui.llm.usage import UsageTotals, call_usage
from cacao_tui.llm.user_config import LLMSettings
from cacao_tui.settings import DEFAULTS
from cacao_tui.store.atomic import DiskFull

log = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)

DEFAULT_MAX_CONCURRENT = DEFAULTS.llm_concurrency
DEFAULT_REASKS = 2  # reminders when a tool call is required
DEFAULT_REPAIRS = 1  # repair turns of a structured reply that did not validate
COUNT_NEAR = 0.85  # ask the provider's token counter once the estimate is past this share of the room
TRUNCATED_TOOL_CALL = (
    "your output was cut off at the output token limit, so these arguments may be incomplete; "
    "the tool was not run. Call it again with shorter arguments (e.g. write a large file in parts)."
)
# A 429 that no wait clears (billing, a spent monthly quota): not retried.
_HARD_QUOTA = re.compile(r"insufficient_quota|exceeded your current quota|billing|credit balance", re.IGNORECASE)
STRUCTURED_TASK = "answer with the JSON object the first message asks for, matching the schema"
# The TrackedLLM whose concurrency slot the current task holds (``TrackedLLM.slot``): its calls
# then go out without waiting for another.
_HOLDING: ContextVar[object | None] = ContextVar("cacao_llm_slot", default=None)


@dataclass(frozen=True)
class RetryNotice:
    """Passed to ``on_retry`` before each wait: attempt ``attempt`` failed with ``error``;
    ``note`` says when the server's Retry-After was not followed (capped backoff)."""

    key: CallKey
    provider: str
    attempt: int
    delay_s: float
    error: str
    status: int | None
    note: str | None = None


OnCall = Callable[[CallRecord], None]
OnRetry = Callable[[RetryNotice], None]


class TrackedLLM:
    """Calls with retries, timeouts, a concurrency limit, usage totals, budgets and records.

    ``record_root`` is the run's output directory (None: record nothing). ``budget_usd``,
    ``budget_tokens``: once the run's cost or tokens (in + out) reach it, new calls raise
    BudgetExceeded (calls in flight finish); the token cap works for unpriced models too.
    ``reasks`` bounds the reminders ``chat(require_tool=True)`` sends, ``repairs`` the
    repair turns of ``structured``. ``timeout_s`` bounds one attempt, ``call_timeout_s``
    the whole call with its retries and waits (default: ``llm_call_timeout_factor`` times
    ``timeout_s``). ``temperatures``: None sends none (the server's default). ``info``:
    the model's limits and controls; ``settings``: the reasoning effort and output limit
    per step (``--reasoning``, ``--max-tokens``, llm.toml). ``cache_scope`` names the run
    in prompt-cache keys. Cancelling the task that awaits a call cancels the request in
    flight.
    """

    def __init__(
        self,
        provider: Provider,
        *,
        price: Price | None = None,
        temperatures: Temperatures | None = None,
        record_root: Path | None = None,
        budget_usd: float | None = None,
        budget_tokens: int | None = None,
        on_call: OnCall | None = None,
        on_retry: OnRetry | None = None,
        on_progress: OnProgress | None = None,
        retry: RetryPolicy | None = None,
        timeout_s: float | None = None,
        call_timeout_s: float | None = None,
        max_tokens: int | None = None,
        max_concurrent: int = DEFAULT_MAX_CONCURRENT,
        reasks: int = DEFAULT_REASKS,
        repairs: int = DEFAULT_REPAIRS,
        reply_text_cap: int | None = None,
        reply_cap: int | None = None,
        context_message_cap: int | None = None,
        context_total_cap: int | None = None,
        info: ModelInfo | None = None,
        settings: LLMSettings | None = None,
        cache_scope: str = "",
    ) -> None:
        self._provider = provider
        self.price = price
        self.temperatures = temperatures
        self.record_root = Path(record_root) if record_root is not None else None
        self.budget_usd = budget_usd
        self.budget_tokens = budget_tokens
        self.on_call = on_call
        self.on_retry = on_retry
        self.on_progress = on_progress
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
        self.repairs = max(0, repairs)
        self.info = info or ModelInfo()
        self.settings = settings or LLMSettings()
        self.cache_scope = cache_scope
        self.usage = UsageTotals()
        self.estimator = TokenEstimator()
        self.dropped: set[str] = set()  # optional parameters the server refused: not sent again this run
        self._window: int | None = None  # a context window a server named in a 400, when smaller
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
        """False when the model has no price: costs read 0 and only --budget-tokens can bite."""
        return self.price is not None

    @property
    def spent_usd(self) -> float:
        return self.usage.run.cost_usd

    @property
    def context_window(self) -> int:
        return min(self.info.context_window, self._window or self.info.context_window)

    def covers(self, branch: str | None, iteration: int | None) -> bool:
        """Whether the provider can answer this branch's iteration: False only for a replay whose
        recording holds none of its calls (the engine then starts no iteration, nor branch, that
        could only fail)."""
        covers = getattr(self._provider, "covers", None)
        return True if covers is None else bool(covers(branch, iteration))

    def replay_progress(self) -> tuple[int, int] | None:
        """A replay's (recorded calls replayed, recorded calls); None for any other provider."""
        progress = getattr(self._provider, "replay_progress", None)
        return None if progress is None else progress()

    def budget_reached(self) -> bool:
        if self.budget_usd is not None and self.spent_usd >= self.budget_usd:
            return True
        return self.budget_tokens is not None and self.usage.tokens >= self.budget_tokens

    def next_key(self, ctx: CallContext) -> CallKey:
        group = (ctx.branch, ctx.iteration, ctx.node)
        index = self._counters.get(group, 0)
        self._counters[group] = index + 1
        return CallKey(ctx.branch, ctx.iteration, ctx.node, index)

    async def aclose(self) -> None:
        await self._provider.aclose()

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one concurrency slot: a step builds its prompt once the slot is its own, so what
        the prompt says of the run (the other branches' statuses) is current when it is sent, and
        the calls made inside go out at once."""
        if _HOLDING.get() is self:
            yield
            return
        async with self._semaphore:
            token = _HOLDING.set(self)
            try:
                yield
            finally:
                _HOLDING.reset(token)

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
        purpose: str = "chat",
    ) -> ChatResponse:
        """One model turn. With ``require_tool`` a reply without a tool call is answered with
        a reminder, at most ``reasks`` times, then ReplyUnusable; the caller's history is
        not touched (append ``resp.to_message()`` yourself)."""
        tool_list = list(tools or [])
        response, _ = await self._call(ctx, list(messages), tool_list, system, max_tokens, purpose=purpose)
        if not require_tool or not tool_list:
            return response
        conversation = list(messages)
        for _ in range(self.reasks):
            if response.tool_calls:
                return response
            conversation += [response.to_message(), Message(role="user", content=_tool_reminder(tool_list, response))]
            response, _ = await self._call(ctx, conversation, tool_list, system, max_tokens, purpose="reask")
        if response.tool_calls:
            return response
        names = ", ".join(t.name for t in tool_list)
        raise ReplyUnusable(
            f"{ctx.node}: the model replied {self.reasks + 1} times without calling a tool ({names}); "
            f"last reply: {_snippet(response.text) or '(empty)'}",
            reason="no tool call",
            text=response.text,
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
        """A validated ``model`` instance. The provider's own structured output is used where
        the model supports it, the schema is in the prompt in every case, and the reply is
        read tolerantly (reasoning blocks, fences, trailing commas, text around the JSON).
        A refusal is retried once with the task restated; a reply that does not validate
        gets ``repairs`` repair turns quoting the error; then ReplyUnusable."""
        conversation = list(messages)
        error = ""
        restated = False
        repairs_left = self.repairs
        replies = 0
        purpose = "structured"
        while True:
            # The schema is stated once: as the request's response format (OpenAI, Gemini) or the
            # answer tool (Anthropic) where the model takes one, in the prompt otherwise (also
            # once a server has refused the response format in this run).
            native = self.info.structured != "prompt" and "structured" not in self.dropped
            schema = native_schema(model) if native else None
            instructions = format_instructions(model.__name__, schema) if native else schema_instructions(model)
            response, record = await self._call(
                ctx,
                conversation,
                [],
                f"{system}\n\n{instructions}" if system else instructions,
                max_tokens,
                purpose=purpose,
                json_output=True,
                schema=schema,
                schema_name=model.__name__,
            )
            replies += 1
            refused = refusal_reason(response)
            if refused and not restated:
                restated = True
                self._note(record, f"a refusal, retried once with the task restated: {refused}")
                conversation = [
                    *conversation,
                    response.to_message(),
                    Message(role="user", content=restate(refused, STRUCTURED_TASK)),
                ]
                purpose = "retry"
                continue
            try:
                parsed = parse_reply(response.text, model)
            except StructuredOutputError as exc:
                error = refused or str(exc)
            else:
                if parsed.repairs:
                    self._note(record, "JSON read after repairs: " + ", ".join(parsed.repairs))
                return parsed.value
            if repairs_left <= 0:
                break
            repairs_left -= 1
            truncated = response.stop_reason == "max_tokens"
            conversation = [
                *conversation,
                response.to_message(),
                Message(role="user", content=reask_message(error, truncated=truncated)),
            ]
            purpose = "reask"
        raise ReplyUnusable(
            f"{ctx.node}: no valid {model.__name__} after {replies} replies: {error}",
            reason=error,
            text=response.text,
        )

    # -- one call: fit, send, retry, record ----------------------------------------------------

    def _check_budget(self) -> None:
        if self.budget_usd is not None and self.spent_usd >= self.budget_usd:
            raise BudgetExceeded(
                f"LLM budget reached: ${self.spent_usd:.4f} spent of ${self.budget_usd:.4f} "
                "(--budget-usd); no new calls"
            )
        if self.budget_tokens is not None and self.usage.tokens >= self.budget_tokens:
            raise BudgetExceeded(
                f"LLM token budget reached: {self.usage.tokens:,} tokens used of {self.budget_tokens:,} "
                "(--budget-tokens); no new calls"
            )

    def _cache_key(self, ctx: CallContext) -> str:
        """One key per branch of the run (the master has its own): calls that share a prefix
        are routed to the same cache."""
        digest = hashlib.sha256(f"{self.cache_scope}\0{ctx.branch or ''}".encode()).hexdigest()[:16]
        return f"cacao-{digest}"

    async def _fit(self, request: ChatRequest, target_tokens: int | None = None) -> tuple[list[Message], list[str]]:
        """The messages within the context window (less the output limit); notes when shrunk."""
        room = target_tokens or int((self.context_window - request.max_tokens) * 0.97)
        fixed_chars = request_chars(request.system, [], request.tools)
        estimate = self.estimator.tokens(fixed_chars + sum(message_chars(m) for m in request.messages))
        notes: list[str] = []
        counter = getattr(self._provider, "count_tokens", None)
        if target_tokens is None and estimate > COUNT_NEAR * room and counter is not None:
            try:
                counted = await asyncio.wait_for(counter(request), timeout=min(30.0, self.timeout_s))
            except Exception as exc:
                log.info("token count failed for %s: %s", request.key, exc)
                counted = None
            if counted:
                chars = fixed_chars + sum(message_chars(m) for m in request.messages)
                self.estimator.observe(chars, counted)
                notes.append(f"prompt counted by the provider: {counted:,} tokens")
                estimate = counted
        if estimate <= room:
            return request.messages, notes
        fixed = self.estimator.tokens(fixed_chars)

        def count(ms: list[Message]) -> int:
            return self.estimator.tokens(sum(message_chars(m) for m in ms))

        fitted = fit_messages(request.messages, max(256, room - fixed), count)
        return fitted.messages, notes + fitted.notes

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
        schema: dict | None = None,
        schema_name: str = "answer",
    ) -> tuple[ChatResponse, CallRecord]:
        self._check_budget()
        key = self.next_key(ctx)
        secrets = known_secrets()
        sent = _outgoing(messages, secrets, self._caps())
        system = redact(system, secrets) if system else system
        effort = None if "reasoning" in self.dropped else self.settings.reasoning_for(ctx.node)
        answer = self.settings.max_tokens_for(ctx.node) or max_tokens or self.max_tokens
        out_limit = self.info.output_limit(answer, effort)
        window = self.context_window
        if out_limit > window // 2:  # a small window (a local model): half of it for the prompt
            out_limit = max(1024, window // 2)
        meter = StreamMeter(key, time.monotonic(), self.on_progress)
        request = ChatRequest(
            key=key,
            messages=sent,
            tools=tools,
            system=system,
            max_tokens=out_limit,
            json_output=json_output,
            temperature=temperature_for_call(self.temperatures, ctx.node, structured=json_output),
            schema=None if "structured" in self.dropped else schema,
            schema_name=schema_name,
            reasoning=effort,
            cache_key=None if "cache" in self.dropped else self._cache_key(ctx),
            info=self.info,
            on_delta=meter,
            reply_text_cap=self.reply_text_cap,
            reply_cap=self.reply_cap,
        )
        request.messages, notes = await self._fit(request)
        record = CallRecord(
            branch=key.branch,
            iteration=key.iteration,
            node=key.node,
            index=key.index,
            purpose=purpose,
            provider=self.provider,
            model=self.model,
            system=system,
            messages=request.messages,
            tools=tools,
            max_tokens=request.max_tokens,
            temperature=request.temperature,
            reasoning_effort=effort,
            cache_key=request.cache_key,
            notes=notes,
        )
        started = time.monotonic()
        # The call's clock starts when it first gets a slot: waiting behind other calls
        # (the concurrency limit) is not the provider's delay (its latency, its tokens per second).
        deadline: float | None = None
        on_wire: list[float] = []  # when the first attempt got its slot
        policy = self.retry
        final: LLMError = LLMError("no attempt was made")
        retries = 0
        resent: set[str] = set()  # immediate re-sends made (a shrunk context, a dropped parameter)
        while True:
            attempt_started = time.time()
            t0: float | None = None
            limit = self.timeout_s
            meter.restart()
            try:
                async with contextlib.nullcontext() if _HOLDING.get() is self else self._semaphore:
                    t0 = time.monotonic()
                    meter.started = t0
                    if deadline is None:
                        deadline = t0 + self.call_timeout_s
                        on_wire.append(t0)
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
                record.queued_s = round((on_wire[0] if on_wire else started) - started, 3)
                wire_start = on_wire[0] if on_wire else started
                return self._succeed(record, request, response, time.monotonic() - (t0 or started), wire_start, secrets)

            failure = _redacted_failure(failure, secrets)
            record.attempts.append(_attempt(attempt_started, t0, failure))
            if failure.kind == "context_length" and "context" not in resent:
                resent.add("context")
                await self._shrink_after_overflow(request, record, failure)
                record.attempts[-1].delay_s = 0.0
                continue
            if failure.kind == "unsupported" and failure.param and failure.param not in resent:
                resent.add(failure.param)
                self._drop(request, record, failure)
                record.attempts[-1].delay_s = 0.0
                continue
            if failure.status == 429 and _HARD_QUOTA.search(str(failure)):
                final = failure
                break
            if not failure.retryable or not policy.may_retry(retries, failure.status):
                final = failure
                break
            delay, capped = policy.delay_s(retries, failure.retry_after_s)
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    final = ProviderError(
                        f"{failure}; no time left for a retry within the call's limit of {self.call_timeout_s:g} s",
                        kind=failure.kind,
                        status=failure.status,
                    )
                    break
                if failure.retry_after_s is not None and capped is None and delay >= left:
                    delay = policy.backoff_s(retries)
                    capped = (
                        f"the server asked to wait {failure.retry_after_s:.0f} s, more than the {left:.0f} s "
                        "left of the call; retrying after the capped backoff"
                    )
                delay = min(delay, left)  # the next attempt then gets what is left, if anything
            retries += 1
            record.attempts[-1].delay_s = delay
            if capped:
                self._note(record, capped, save=False)
            log.info("LLM %s call %s failed (%s); retry %d in %.1f s", self.provider, key, failure, retries, delay)
            self._notify_retry(RetryNotice(key, self.provider, retries, delay, str(failure), failure.status, capped))
            meter.waiting(delay, f"{failure}" + (f" ({capped})" if capped else ""))
            await policy.sleep(delay)

        record.queued_s = round((on_wire[0] if on_wire else started) - started, 3)
        return self._fail(record, final, on_wire[0] if on_wire else started)

    async def _shrink_after_overflow(self, request: ChatRequest, record: CallRecord, failure: ProviderError) -> None:
        """A context-length 400: learn the window if the server named it, shrink, send again once."""
        if failure.context_window:
            self._window = min(self._window or failure.context_window, failure.context_window)
            request.max_tokens = min(request.max_tokens, max(1024, self.context_window // 2))
            record.max_tokens = request.max_tokens
        sent = sum(message_chars(m) for m in request.messages) + request_chars(request.system, [], request.tools)
        current = self.estimator.tokens(sent)
        target = int(min(current * 0.7, (self.context_window - request.max_tokens) * 0.9))
        request.messages, notes = await self._fit(request, target_tokens=max(256, target))
        record.messages = request.messages
        self._note(
            record,
            f"the server answered context length exceeded; {'; '.join(notes) or 'nothing to shrink'}; sent again",
            save=False,
        )

    def _drop(self, request: ChatRequest, record: CallRecord, failure: ProviderError) -> None:
        """The server refused an optional parameter: the call goes again without it, and so do
        the run's later calls."""
        param = failure.param or ""
        self.dropped.add(param)
        if param == "structured":
            if request.schema is not None:  # the schema goes into the prompt instead
                request.system = _schema_in_prompt(request.system, request.schema)
                record.system = request.system
            request.schema = None
        elif param == "reasoning":
            request.reasoning = None
            record.reasoning_effort = None
        elif param == "cache":
            request.cache_key = None
            record.cache_key = None
        refused = _snippet(str(failure), 120)
        note = f"the server refused the {param} parameter ({refused}); sent without it, and later calls of this run too"
        self._note(record, note, save=False)

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
        self,
        record: CallRecord,
        request: ChatRequest,
        response: ChatResponse,
        latency_s: float,
        started: float,
        secrets: tuple[str, ...],
    ) -> tuple[ChatResponse, CallRecord]:
        if response.cut is not None:  # cut while it streamed (the adapter's ReplyGatherer)
            record.notes.append(response.cut)
            log.warning("LLM %s call %s: %s", self.provider, record.key, response.cut)
        response, cut = cap_reply(response, text_cap=self.reply_text_cap, cap=self.reply_cap)
        if cut is not None:
            record.notes.append(cut)
            log.warning("LLM %s call %s: %s; cut to the cap", self.provider, record.key, cut)
        response = _redacted_response(response.model_copy(deep=True), secrets)
        response.latency_s = latency_s
        if not response.model:
            response.model = self.model
        if response.tool_calls and response.stop_reason == "max_tokens":
            last = response.tool_calls[-1]
            if not (response.cut and last.error):  # cut while it streamed: the gatherer's reason stands
                last.error = TRUNCATED_TOOL_CALL
        if not response.tool_calls and not strip_reasoning(response.text)[0].strip() and response.reasoning.strip():
            response.text = response.reasoning
            record.notes.append("the reply's content was empty: its reasoning text is used as the content")
        response.usage, fixed = call_usage(response.usage)
        if fixed is not None:
            record.notes.append(fixed)
            log.warning("LLM %s call %s: %s", self.provider, record.key, fixed)
        response.usage.cost_usd = cost_usd(response.usage, self.price)
        if response.usage.input_tokens:
            chars = request_chars(request.system, request.messages, request.tools)
            self.estimator.observe(chars, response.usage.input_tokens)
        record.response = response
        record.usage = response.usage
        record.retries = len(record.attempts)
        record.latency_s = time.monotonic() - started  # from the first attempt's start on the wire
        record.answer_s = round(latency_s, 3)
        self.usage.add(record.branch, record.iteration, record.node, response.usage, failed=False)
        self._save_and_notify(record)
        return response, record

    def _fail(self, record: CallRecord, error: LLMError, started: float) -> tuple[ChatResponse, CallRecord]:
        attempts = len(record.attempts)
        tail = f" (gave up after {attempts} attempts)" if attempts > 1 else ""
        if isinstance(error, ReplayMismatch):
            final: LLMError = error
        else:
            final = CallFailed(f"{self.provider} ({self.model}) call failed, {record.key}: {redact(str(error))}{tail}")
        record.error = str(final)
        record.retries = max(0, attempts - 1)
        record.latency_s = time.monotonic() - started
        self.usage.add(record.branch, record.iteration, record.node, None, failed=True)
        self._save_and_notify(record)
        final.record = record  # type: ignore[attr-defined]
        raise final

    def _note(self, record: CallRecord, note: str, *, save: bool = True) -> None:
        """Add what was done to a call's record (and write it again when it is already saved)."""
        record.notes.append(note)
        if save and record.path is not None and self.record_root is not None:
            try:
                write_record(self.record_root, record)
            except OSError as exc:
                log.info("cannot update LLM call record %s: %s", record.key, exc)

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
        param=failure.param,
        context_window=failure.context_window,
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


def _schema_in_prompt(system: str | None, schema: dict) -> str:
    """The system prompt with the schema in it, for a server that refused the response format."""
    text = system or ""
    at = text.find("Answer with one JSON object, ")  # format_instructions: what the schema replaces
    base = text[:at].rstrip() if at >= 0 else text
    return f"{base}\n\n{schema_text(schema)}" if base else schema_text(schema)
