"""Each real SDK against a loopback server speaking its wire protocol."""

from __future__ import annotations

import pytest
from pydantic import BaseModel
from wire_servers import DIALECTS, Dialect, Reply, WireServer

from cacao_tui.llm import CallContext, LLMError, Message, RetryPolicy, ToolSpec, TrackedLLM, price_for

pytestmark = pytest.mark.parametrize("dialect", list(DIALECTS.values()), ids=list(DIALECTS))

CTX = CallContext("tiled", 1, "author")
READ_FILE = ToolSpec(
    name="read_file",
    description="Read a file of the problem.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)


class Strategy(BaseModel):
    name: str
    blocks: int


class Delays:
    """A sleep that records how long it was asked to wait and returns at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def make_llm(dialect: Dialect, server: WireServer, *, timeout_s: float = 10.0, **kwargs) -> tuple[TrackedLLM, Delays]:
    delays = Delays()
    retry = kwargs.pop("retry", None) or RetryPolicy(base_delay_s=0.01, jitter=0.0, sleep=delays)
    provider = dialect.build(server, timeout_s=timeout_s)
    price = price_for(dialect.provider, dialect.model)
    return TrackedLLM(provider, price=price, retry=retry, timeout_s=timeout_s, **kwargs), delays


async def test_tool_call_round_trip(dialect: Dialect, server: WireServer) -> None:
    server.push(dialect.tool_call("read_file", {"path": "kernel.cu"}, call_id="call_7"), dialect.text("All read."))
    llm, _ = make_llm(dialect, server)
    messages = [Message(role="user", content="Read kernel.cu, then say done.")]

    first = await llm.chat(messages, [READ_FILE], ctx=CTX, system="You write CUDA kernels.")
    assert first.stop_reason == "tool_use"
    [call] = first.tool_calls
    assert (call.name, call.arguments, call.error) == ("read_file", {"path": "kernel.cu"}, None)
    assert dialect.sent_tool_names(server.requests[0].body) == ["read_file"]
    assert "You write CUDA kernels." in dialect.sent_texts(server.requests[0].body)

    messages += [first.to_message(), Message(role="tool", tool_call_id=call.id, content="__global__ void k() {}")]
    second = await llm.chat(messages, [READ_FILE], ctx=CTX)
    assert (second.text, second.stop_reason) == ("All read.", "end")
    [(call_id, content, is_error)] = dialect.sent_tool_results(server.requests[1].body)
    assert call_id == "call_7" and content == "__global__ void k() {}" and not is_error

    totals = llm.usage.node("tiled", 1, "author")
    assert totals.calls == 2 and totals.input_tokens == 200 and totals.output_tokens == 40
    if dialect.provider == "cerit":
        assert llm.usage.run.cost_usd == 0  # CERIT models carry no price
    else:
        assert llm.usage.run.cost_usd == pytest.approx(llm.usage.run.cost_usd) and llm.usage.run.cost_usd > 0
    await llm.aclose()


async def test_structured_output(dialect: Dialect, server: WireServer) -> None:
    server.push(dialect.text('```json\n{"name": "tiled", "blocks": 4}\n```'))
    llm, _ = make_llm(dialect, server)
    result = await llm.structured([Message(role="user", content="Propose one strategy.")], Strategy, ctx=CTX)
    assert result == Strategy(name="tiled", blocks=4)
    sent = " ".join(dialect.sent_texts(server.requests[0].body))
    assert "JSON schema" in sent and '"blocks"' in sent
    await llm.aclose()


async def test_structured_output_reasks_with_the_validation_error(dialect: Dialect, server: WireServer) -> None:
    server.push(dialect.text('{"name": "tiled"}'), dialect.text('{"name": "tiled", "blocks": 8}'))
    llm, _ = make_llm(dialect, server)
    result = await llm.structured([Message(role="user", content="Propose one strategy.")], Strategy, ctx=CTX)
    assert result.blocks == 8
    reask = dialect.sent_texts(server.requests[1].body)[-1]
    assert "blocks" in reask and "Field required" in reask
    await llm.aclose()


async def test_429_honours_retry_after(dialect: Dialect, server: WireServer) -> None:
    server.push(dialect.error(429, "slow down", {"retry-after": "3"}), dialect.text("ok"))
    calls = []
    llm, delays = make_llm(dialect, server, on_call=calls.append)
    response = await llm.chat([Message(role="user", content="hi")], ctx=CTX)
    assert response.text == "ok"
    assert delays.waits == [3.0]
    [record] = calls
    assert record.retries == 1 and record.attempts[0].status == 429 and record.attempts[0].retry_after_s == 3.0
    await llm.aclose()


async def test_500_is_retried_with_exponential_backoff(dialect: Dialect, server: WireServer) -> None:
    server.push(dialect.error(500, "boom"), dialect.error(500, "boom"), dialect.text("ok"))
    llm, delays = make_llm(dialect, server)
    assert (await llm.chat([Message(role="user", content="hi")], ctx=CTX)).text == "ok"
    assert delays.waits == pytest.approx([0.01, 0.02])
    await llm.aclose()


async def test_500_forever_gives_up_with_one_clear_line(dialect: Dialect, server: WireServer) -> None:
    server.repeat = dialect.error(500, "internal failure")
    retry = RetryPolicy(retries=2, base_delay_s=0.0, jitter=0.0, sleep=Delays())
    llm, _ = make_llm(dialect, server, retry=retry)
    with pytest.raises(LLMError) as info:
        await llm.chat([Message(role="user", content="hi")], ctx=CTX)
    message = str(info.value)
    assert "\n" not in message and "HTTP 500" in message and "gave up after 3 attempts" in message
    assert len(server.requests) == 3
    assert llm.usage.run.failed_calls == 1
    await llm.aclose()


async def test_401_is_not_retried_and_names_the_key(dialect: Dialect, server: WireServer) -> None:
    server.repeat = dialect.error(401, "invalid x-api-key")
    llm, _ = make_llm(dialect, server)
    with pytest.raises(LLMError, match=dialect.key_var.split("_")[0]):
        await llm.chat([Message(role="user", content="hi")], ctx=CTX)
    assert len(server.requests) == 1
    await llm.aclose()


async def test_timeout_is_retried(dialect: Dialect, server: WireServer) -> None:
    slow = dialect.text("too late")
    slow.delay_s = 1.0
    server.push(slow, dialect.text("in time"))
    calls = []
    llm, _ = make_llm(dialect, server, timeout_s=0.2, on_call=calls.append)
    assert (await llm.chat([Message(role="user", content="hi")], ctx=CTX)).text == "in time"
    assert calls[0].attempts[0].kind == "timeout"
    await llm.aclose()


async def test_truncated_text_is_reported(dialect: Dialect, server: WireServer) -> None:
    server.push(dialect.text("The kernel should use shared mem", truncated=True))
    llm, _ = make_llm(dialect, server)
    response = await llm.chat([Message(role="user", content="hi")], ctx=CTX)
    assert response.stop_reason == "max_tokens" and response.text.startswith("The kernel")
    await llm.aclose()


async def test_truncated_tool_call_is_not_run(dialect: Dialect, server: WireServer) -> None:
    server.push(dialect.tool_call("read_file", {"path": "kernel.cu"}, truncated=True))
    llm, _ = make_llm(dialect, server)
    response = await llm.chat([Message(role="user", content="hi")], [READ_FILE], ctx=CTX)
    assert response.stop_reason == "max_tokens"
    assert response.tool_calls[-1].error and "cut off" in response.tool_calls[-1].error
    await llm.aclose()


async def test_truncated_structured_output_is_reasked_shorter(dialect: Dialect, server: WireServer) -> None:
    server.push(dialect.text('{"name": "til', truncated=True), dialect.text('{"name": "t", "blocks": 2}'))
    llm, _ = make_llm(dialect, server)
    result = await llm.structured([Message(role="user", content="go")], Strategy, ctx=CTX)
    assert result.blocks == 2
    assert "cut off" in dialect.sent_texts(server.requests[1].body)[-1]
    await llm.aclose()


async def test_malformed_tool_arguments_go_back_as_a_tool_error(dialect: Dialect, server: WireServer) -> None:
    server.push(dialect.malformed_tool_call("read_file"), dialect.text("Sorry, fixed."))
    llm, _ = make_llm(dialect, server)
    messages = [Message(role="user", content="Read kernel.cu")]
    first = await llm.chat(messages, [READ_FILE], ctx=CTX)
    assert first.stop_reason == "tool_use"
    [call] = first.tool_calls
    assert call.error and call.arguments == {}

    # The engine answers with the error instead of running the tool; the history converts.
    messages += [first.to_message(), Message(role="tool", tool_call_id=call.id, content=call.error, is_error=True)]
    second = await llm.chat(messages, [READ_FILE], ctx=CTX)
    assert second.text == "Sorry, fixed."
    sent = server.requests[1].body
    results = dialect.sent_tool_results(sent)
    if results:
        assert results[0][2], "the tool result is marked as an error"
    else:  # Gemini: a malformed call has no function_call part, so its error goes back as text
        assert any("malformed" in t for t in dialect.sent_texts(sent))
    await llm.aclose()


async def test_useless_text_when_a_tool_is_required_ends_in_a_clear_error(dialect: Dialect, server: WireServer) -> None:
    server.repeat = dialect.text("I would probably tile the loop, but let me think more.")
    llm, _ = make_llm(dialect, server, reasks=2)
    with pytest.raises(LLMError, match="without calling a tool") as info:
        await llm.chat([Message(role="user", content="write the kernel")], [READ_FILE], ctx=CTX, require_tool=True)
    assert "\n" not in str(info.value)
    assert len(server.requests) == 3
    assert "must call one of the tools" in dialect.sent_texts(server.requests[1].body)[-1]
    await llm.aclose()


async def test_useless_text_for_structured_output_ends_in_a_clear_error(dialect: Dialect, server: WireServer) -> None:
    server.repeat = dialect.text("Sure! Here is my strategy: tile everything.")
    llm, _ = make_llm(dialect, server, repairs=2)
    with pytest.raises(LLMError, match="no valid Strategy after 3 replies"):
        await llm.structured([Message(role="user", content="go")], Strategy, ctx=CTX)
    assert len(server.requests) == 3
    await llm.aclose()


async def test_bad_gateway_html_body_is_retried(dialect: Dialect, server: WireServer) -> None:
    server.push(Reply(502, b"<html>Bad Gateway</html>"), dialect.text("ok"))
    llm, delays = make_llm(dialect, server)
    assert (await llm.chat([Message(role="user", content="hi")], ctx=CTX)).text == "ok"
    assert len(delays.waits) == 1
    await llm.aclose()
