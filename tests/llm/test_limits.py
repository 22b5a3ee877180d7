"""Time and size limits of a call, with each real SDK against a loopback server:
the per-attempt and per-call timeouts, cancellation of a call in flight, reply caps and
the capped history sent back."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from wire_servers import DIALECTS, Dialect, Reply, WireServer

from cacao_tui.llm import CallContext, LLMError, Message, RetryPolicy, ToolSpec, TrackedLLM, llm_timeout_s
from cacao_tui.llm.bounds import cap_context, cap_reply
from cacao_tui.llm.recording import read_records
from cacao_tui.llm.types import ChatResponse, ToolCall
from cacao_tui.settings import DEFAULTS

CTX = CallContext(None, None, "analyze")
HI = [Message(role="user", content="hi")]
WRITE = ToolSpec(
    name="write_file",
    description="Write a file.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}},
)
by_dialect = pytest.mark.parametrize("dialect", list(DIALECTS.values()), ids=list(DIALECTS))


def hang(dialect: Dialect, seconds: float = 30.0) -> Reply:
    reply = dialect.text("too late")
    reply.delay_s = seconds
    return reply


# -- where the limit comes from ---------------------------------------------------------------


def test_timeout_flag_then_environment_then_default() -> None:
    assert llm_timeout_s(12.0, {"CACAO_LLM_TIMEOUT": "99"}) == 12.0
    assert llm_timeout_s(None, {"CACAO_LLM_TIMEOUT": " 99 "}) == 99.0
    assert llm_timeout_s(None, {}) == DEFAULTS.llm_timeout_s == 300.0
    for bad in ("soon", "-1", "0", "inf", "nan", "1e9"):
        with pytest.raises(LLMError, match="CACAO_LLM_TIMEOUT") as info:
            llm_timeout_s(None, {"CACAO_LLM_TIMEOUT": bad})
        assert "\n" not in str(info.value)


def test_call_limit_defaults_to_three_attempts_worth() -> None:
    from cacao_tui.llm import ScriptedProvider

    llm = TrackedLLM(ScriptedProvider([]), timeout_s=10.0)
    assert llm.call_timeout_s == 30.0
    assert TrackedLLM(ScriptedProvider([])).call_timeout_s == 900.0


# -- a hung endpoint ------------------------------------------------------------------------------


@by_dialect
async def test_a_hung_endpoint_fails_at_the_call_limit_with_one_line(dialect: Dialect, server: WireServer) -> None:
    server.repeat = hang(dialect)
    records = []
    provider = dialect.build(server, timeout_s=0.4)
    llm = TrackedLLM(
        provider,
        timeout_s=0.4,
        call_timeout_s=1.0,
        retry=RetryPolicy(base_delay_s=0.05, jitter=0.0),
        on_call=records.append,
    )
    started = time.monotonic()
    with pytest.raises(LLMError) as info:
        await llm.chat(HI, ctx=CTX)
    elapsed = time.monotonic() - started
    message = str(info.value)
    assert elapsed < 3.0, elapsed
    assert "\n" not in message and "call's limit of 1 s" in message and "--llm-timeout" in message
    [record] = records
    assert all(a.kind == "timeout" for a in record.attempts) and len(record.attempts) >= 2
    assert "per attempt" in record.attempts[0].error
    await llm.aclose()


@by_dialect
async def test_cancelling_a_call_drops_the_request_at_once(dialect: Dialect, server: WireServer) -> None:
    server.repeat = hang(dialect)
    llm = TrackedLLM(dialect.build(server, timeout_s=60.0), timeout_s=60.0)
    task = asyncio.ensure_future(llm.chat(HI, ctx=CTX))
    while not server.requests:
        await asyncio.sleep(0.01)
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < 1.0
    await llm.aclose()


async def test_a_retry_after_longer_than_the_time_left_gives_way_to_the_capped_backoff(server: WireServer) -> None:
    dialect = DIALECTS["openai"]
    server.push(dialect.error(429, "slow down", {"retry-after": "30"}), dialect.text("answered"))
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    records = []
    llm = TrackedLLM(
        dialect.build(server),
        timeout_s=5.0,
        call_timeout_s=10.0,
        retry=RetryPolicy(base_delay_s=0.5, jitter=0.0, sleep=sleep),
        on_call=records.append,
    )
    assert (await llm.chat(HI, ctx=CTX)).text == "answered"
    assert waits == [0.5] and len(server.requests) == 2
    assert "more than the" in " ".join(records[0].notes)
    await llm.aclose()


@by_dialect
async def test_a_ten_megabyte_reply_is_cut_and_not_resent(dialect: Dialect, server: WireServer, tmp_path: Path) -> None:
    huge = "x" * (10 * 1024 * 1024)
    server.push(dialect.text(huge), dialect.text("short"), dialect.text("short again"))
    llm = TrackedLLM(dialect.build(server), record_root=tmp_path)
    messages = list(HI)
    first = await llm.chat(messages, ctx=CTX)
    assert len(first.text) < DEFAULTS.llm_reply_text_chars + 500
    # Cut while it streamed: reading stopped once more had come than any cap keeps (not all 10 MB).
    assert first.text.endswith("]") and "reply cut here" in first.text and "cut while it streamed" in first.text
    for _ in range(2):
        messages += [first.to_message(), Message(role="user", content="go on")]
        await llm.chat(messages, ctx=CTX)
    for request in server.requests[1:]:
        assert len(json.dumps(request.body)) < 200_000
    records = read_records(tmp_path)
    assert records[0].notes and "its text was cut to" in records[0].notes[0]
    written = sum(p.stat().st_size for p in tmp_path.rglob("*.json"))
    assert written < 1_000_000, written
    await llm.aclose()


@by_dialect
async def test_a_tool_call_over_the_cap_is_not_run(dialect: Dialect, server: WireServer) -> None:
    big = {"path": "kernels.cu", "content": "y" * (DEFAULTS.llm_reply_max_chars + 10)}
    server.push(dialect.tool_call("write_file", big, call_id="c1"))
    llm = TrackedLLM(dialect.build(server))
    response = await llm.chat(HI, [WRITE], ctx=CTX)
    [call] = response.tool_calls
    assert call.arguments == {} and call.error and "was not run" in call.error and "edit_file" in call.error
    await llm.aclose()


def test_cap_reply_keeps_what_fits() -> None:
    calls = [
        ToolCall(id="a", name="w", arguments={"c": "1" * 50}),
        ToolCall(id="b", name="w", arguments={"c": "2" * 80}),
    ]
    response = ChatResponse(text="t" * 30, tool_calls=calls)
    same, note = cap_reply(response, text_cap=100, cap=1000)
    assert same is response and note is None
    capped, note = cap_reply(response, text_cap=100, cap=120)
    assert capped.tool_calls[0].arguments == calls[0].arguments and capped.tool_calls[1].error
    assert note and "1 tool call(s)" in note


def test_cap_context_cuts_earlier_turns_and_keeps_signatures() -> None:
    signed = {"anthropic_content": [{"type": "thinking", "thinking": "z" * 5000, "signature": "s" * 5000}]}
    messages = [
        Message(role="user", content="task " + "a" * 5000),
        Message(role="assistant", content="b" * 5000, provider_data=signed),
        Message(role="user", content="c" * 5000),
    ]
    out = cap_context(messages, message_cap=1000, total_cap=100_000, newest_cap=10_000)
    assert len(out[0].content) <= 1000 and out[0].content.startswith("task ") and "cut by cacao" in out[0].content
    block = out[1].provider_data["anthropic_content"][0]
    assert block["thinking"] == "z" * 5000 and block["signature"] == "s" * 5000
    assert out[2] is messages[2]  # the newest message fits its own cap
    plain = [messages[0], Message(role="assistant", content="b" * 5000), messages[2]]
    tight = cap_context(plain, message_cap=10_000, total_cap=7500, newest_cap=10_000)
    assert len(tight[1].content) < 5000 and tight[0].content == plain[0].content  # the task is cut last
