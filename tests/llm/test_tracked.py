"""The tracked wrapper with the scripted fake: keys, usage, cost, budget, retries, limits."""

from __future__ import annotations

import asyncio

import pytest

from cacao_tui.llm import (
    BudgetExceeded,
    CallContext,
    ChatResponse,
    LLMError,
    Message,
    Price,
    ProviderError,
    RetryPolicy,
    ScriptedProvider,
    TrackedLLM,
    Usage,
)
from cacao_tui.llm.pricing import cost_usd
from cacao_tui.llm.registry import price_for
from cacao_tui.llm.retry import is_retryable_status, parse_retry_after

HI = [Message(role="user", content="hi")]


class Waits:
    def __init__(self) -> None:
        self.seen: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.seen.append(seconds)


def reply(input_tokens: int = 1000, output_tokens: int = 100, cached: int = 0) -> ChatResponse:
    return ChatResponse(
        text="ok", usage=Usage(input_tokens=input_tokens, output_tokens=output_tokens, cached_tokens=cached)
    )


async def test_call_index_counts_per_branch_iteration_and_node() -> None:
    provider = ScriptedProvider(lambda request: "ok")
    llm = TrackedLLM(provider)
    for ctx in [
        CallContext(None, None, "analyze"),
        CallContext(None, None, "analyze"),
        CallContext("a", 0, "author"),
        CallContext("a", 0, "author"),
        CallContext("a", 1, "author"),
        CallContext("b", 0, "author"),
    ]:
        await llm.chat(HI, ctx=ctx)
    keys = [(r.key.branch, r.key.iteration, r.key.node, r.key.index) for r in provider.requests]
    assert keys == [
        (None, None, "analyze", 0),
        (None, None, "analyze", 1),
        ("a", 0, "author", 0),
        ("a", 0, "author", 1),
        ("a", 1, "author", 0),
        ("b", 0, "author", 0),
    ]


def test_cost_math() -> None:
    price = Price(input=2.0, output=10.0, cached_input=0.2, cache_write=2.5)
    usage = Usage(input_tokens=1_000_000, output_tokens=100_000, cached_tokens=400_000, cache_write_tokens=100_000)
    # 500k fresh * 2 + 400k cached * 0.2 + 100k written * 2.5 + 100k out * 10, per million.
    assert cost_usd(usage, price) == pytest.approx(1.0 + 0.08 + 0.25 + 1.0)
    assert cost_usd(usage, None) == 0.0
    assert cost_usd(Usage(input_tokens=10, output_tokens=0, cached_tokens=10), Price(1, 1, 0.5)) == pytest.approx(5e-6)


def test_price_table_lookup() -> None:
    assert price_for("anthropic", "claude-sonnet-4-5-20250929") == price_for("anthropic", "claude-sonnet-4-5")
    assert price_for("gemini", "models/gemini-2.5-pro") is not None
    assert price_for("cerit", "qwen3.5") is None and price_for("replay", "claude-sonnet-5-5") is None
    assert price_for("openai", "my-local-llama") is None


async def test_usage_totals_per_node_branch_and_run() -> None:
    llm = TrackedLLM(ScriptedProvider([reply(1000, 100, 200)] * 3), price=Price(1.0, 2.0, 0.5))
    await llm.chat(HI, ctx=CallContext(None, None, "analyze"))
    await llm.chat(HI, ctx=CallContext("a", 0, "plan"))
    await llm.chat(HI, ctx=CallContext("a", 0, "plan"))
    one = (800 * 1.0 + 200 * 0.5 + 100 * 2.0) / 1e6
    assert llm.usage.run.calls == 3 and llm.usage.run.cost_usd == pytest.approx(3 * one)
    assert llm.usage.branch("a").input_tokens == 2000 and llm.usage.branch(None).calls == 1
    assert llm.usage.node("a", 0, "plan").cached_tokens == 400
    summary = llm.usage.to_dict()
    assert summary["run"]["calls"] == 3 and {n["node"] for n in summary["nodes"]} == {"analyze", "plan"}


async def test_budget_cap_stops_new_calls() -> None:
    # Each call: 1M input tokens at $1/M = $1.
    llm = TrackedLLM(ScriptedProvider([reply(1_000_000, 0)] * 5), price=Price(1.0, 1.0, 1.0), budget_usd=2.0)
    ctx = CallContext("a", 0, "author")
    await llm.chat(HI, ctx=ctx)
    assert not llm.budget_reached()
    await llm.chat(HI, ctx=ctx)
    assert llm.budget_reached()
    with pytest.raises(BudgetExceeded, match=r"\$2\.0000 spent of \$2\.0000"):
        await llm.chat(HI, ctx=ctx)
    assert llm.usage.run.calls == 2  # the refused call was never made


async def test_retries_use_backoff_then_give_up() -> None:
    failures = [ProviderError("HTTP 503: busy", status=503, retryable=True)] * 3
    waits = Waits()
    notices = []
    llm = TrackedLLM(
        ScriptedProvider(failures),
        retry=RetryPolicy(retries=2, base_delay_s=2.0, jitter=0.0, sleep=waits),
        on_retry=notices.append,
    )
    with pytest.raises(LLMError, match="gave up after 3 attempts"):
        await llm.chat(HI, ctx=CallContext(None, None, "analyze"))
    assert waits.seen == [2.0, 4.0]  # 2 * 2**n
    assert [(n.attempt, n.status) for n in notices] == [(1, 503), (2, 503)]


def test_default_backoff_is_2_times_2_to_the_n_plus_jitter() -> None:
    policy = RetryPolicy()
    assert policy.retries == 5
    for n in range(5):
        delay = policy.backoff_s(n)
        assert 2.0 * 2**n <= delay <= 2.0 * 2**n + 1.0


async def test_a_long_retry_after_is_not_waited_out_but_retried_with_capped_backoff() -> None:
    """CERIT answers max_parallel_requests with the hourly reset (~3600 s); a slot frees in seconds."""
    waits = Waits()
    notices = []
    busy = ProviderError("HTTP 429: max_parallel_requests", status=429, retryable=True, retry_after_s=3600)
    llm = TrackedLLM(
        ScriptedProvider([busy, busy, "answered"]),
        retry=RetryPolicy(sleep=waits, jitter=0.0),
        on_retry=notices.append,
    )
    records = []
    llm.on_call = records.append
    assert (await llm.chat(HI, ctx=CallContext(None, None, "analyze"))).text == "answered"
    assert waits.seen == [2.0, 4.0]  # the backoff, not 3600 s
    assert all("asked to wait 3600 s" in (n.note or "") for n in notices)
    [record] = records
    assert [a.retry_after_s for a in record.attempts] == [3600, 3600]
    assert any("capped backoff" in note for note in record.notes)


async def test_rate_limits_are_retried_until_the_deadline_not_a_count() -> None:
    waits = Waits()
    busy = ProviderError("HTTP 429: busy", status=429, retryable=True)
    llm = TrackedLLM(ScriptedProvider([busy] * 8 + ["ok"]), retry=RetryPolicy(retries=2, base_delay_s=0.0, sleep=waits))
    assert (await llm.chat(HI, ctx=CallContext(None, None, "analyze"))).text == "ok"
    assert len(waits.seen) == 8


async def test_a_spent_quota_is_not_retried() -> None:
    quota = ProviderError("HTTP 429: You exceeded your current quota", status=429, retryable=True)
    provider = ScriptedProvider([quota, "never"])
    with pytest.raises(LLMError, match="current quota"):
        await TrackedLLM(provider, retry=RetryPolicy(sleep=Waits())).chat(HI, ctx=CallContext(None, None, "a"))
    assert len(provider.requests) == 1


async def test_non_retryable_errors_fail_at_once() -> None:
    provider = ScriptedProvider([ProviderError("HTTP 400: bad request", status=400), "unused"])
    with pytest.raises(LLMError, match="HTTP 400"):
        await TrackedLLM(provider).chat(HI, ctx=CallContext(None, None, "analyze"))
    assert len(provider.requests) == 1


async def test_hung_provider_hits_the_timeout_and_is_retried() -> None:
    calls = 0

    async def hang_once(request):
        nonlocal calls
        calls += 1
        if calls == 1:
            await asyncio.sleep(5)
        return "awake"

    records = []
    llm = TrackedLLM(
        ScriptedProvider(hang_once), timeout_s=0.05, retry=RetryPolicy(sleep=Waits()), on_call=records.append
    )
    assert (await llm.chat(HI, ctx=CallContext(None, None, "analyze"))).text == "awake"
    assert records[0].attempts[0].kind == "timeout"


async def test_unexpected_exception_becomes_one_line() -> None:
    def explode(request):
        raise KeyError("choices\nwith a second line")

    with pytest.raises(LLMError) as info:
        await TrackedLLM(ScriptedProvider(explode)).chat(HI, ctx=CallContext(None, None, "analyze"))
    assert "unexpected KeyError" in str(info.value) and "\n" not in str(info.value)


async def test_concurrency_limit() -> None:
    in_flight = 0
    peak = 0

    async def slow(request):
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.02)
        in_flight -= 1
        return "ok"

    llm = TrackedLLM(ScriptedProvider(slow), max_concurrent=2)
    await asyncio.gather(*(llm.chat(HI, ctx=CallContext(f"b{i}", 0, "author")) for i in range(6)))
    assert peak == 2


async def test_require_tool_accepts_a_late_tool_call() -> None:
    from cacao_tui.llm import ToolSpec

    tool = ToolSpec(name="end_step", description="Finish.")
    provider = ScriptedProvider(["thinking aloud", {"tool_calls": [{"id": "c", "name": "end_step", "arguments": {}}]}])
    response = await TrackedLLM(provider).chat(HI, [tool], ctx=CallContext("a", 0, "author"), require_tool=True)
    assert response.tool_calls[0].name == "end_step"
    assert provider.requests[1].messages[-1].content.startswith("You must call one of the tools (end_step)")


async def test_scripted_provider_runs_dry_with_a_clear_error() -> None:
    with pytest.raises(LLMError, match="script exhausted after 1 responses"):
        llm = TrackedLLM(ScriptedProvider(["only one"]))
        await llm.chat(HI, ctx=CallContext(None, None, "a"))
        await llm.chat(HI, ctx=CallContext(None, None, "a"))


def test_retry_after_parsing_and_retryable_statuses() -> None:
    assert parse_retry_after({"Retry-After": "12"}) == 12.0
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412480.0) == 10.0
    assert parse_retry_after({"retry-after": "soon"}) is None and parse_retry_after(None) is None
    assert all(is_retryable_status(s) for s in (408, 409, 425, 429, 500, 502, 503, 504, 529))
    assert not any(is_retryable_status(s) for s in (400, 401, 403, 404, 422, None))
