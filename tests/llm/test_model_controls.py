"""What issue 20 added to every adapter, each real SDK against a loopback server: streaming
with progress, reasoning controls and reasoning text, native structured output, prompt
caching (breakpoints, cache keys, cached tokens priced), and the classification of a
context-length 400 or a refused parameter."""

from __future__ import annotations

import pytest
from pydantic import BaseModel
from wire_servers import DIALECTS, Dialect, Reply, WireServer

from cacao_tui.llm import CallContext, Message, ModelInfo, RetryPolicy, ToolSpec, TrackedLLM, price_for
from cacao_tui.llm.progress import CallProgress
from cacao_tui.llm.registry import model_info
from cacao_tui.llm.user_config import LLMSettings, StepConfig

by_dialect = pytest.mark.parametrize("dialect", list(DIALECTS.values()), ids=list(DIALECTS))
CTX = CallContext("b1", 1, "author")
HI = [Message(role="user", content="hi")]
TOOL = ToolSpec(name="run", description="Run it.", parameters={"type": "object", "properties": {}})


class Verdict(BaseModel):
    action: str
    reason: str
    feedback: str = ""


def llm_for(dialect: Dialect, server: WireServer, **kwargs) -> TrackedLLM:
    kwargs.setdefault("retry", RetryPolicy(base_delay_s=0.01, jitter=0.0))
    return TrackedLLM(dialect.build(server), price=price_for(dialect.provider, dialect.model), **kwargs)


# -- streaming ---------------------------------------------------------------------------------


@by_dialect
async def test_replies_stream_and_report_progress(dialect: Dialect, server: WireServer) -> None:
    text = "The kernel is memory bound; " * 20
    server.push(dialect.text(text))
    seen: list[CallProgress] = []
    llm = llm_for(dialect, server, on_progress=seen.append)
    response = await llm.chat(HI, ctx=CTX)
    assert response.text == text
    request = server.requests[0]
    assert request.body.get("stream") is True or ":streamGenerateContent" in request.path
    assert seen, "no progress while the reply streamed"
    assert seen[0].phase == "streaming" and seen[0].key.node == "author" and seen[0].key.branch == "b1"
    # The first snapshot came with the first piece, before the rest had arrived.
    assert 0 < seen[0].text_chars < len(text) and text.startswith(seen[0].text_tail)
    await llm.aclose()


@by_dialect
async def test_a_stalled_stream_is_cut_by_the_attempt_timeout_and_retried(dialect: Dialect, server: WireServer) -> None:
    stalled = dialect.text("half a reply that never ends " * 5)
    stalled.stall_after = 3
    server.push(stalled, dialect.text("whole"))
    records = []
    llm = TrackedLLM(
        dialect.build(server, timeout_s=0.6),
        timeout_s=0.6,
        retry=RetryPolicy(base_delay_s=0.01, jitter=0.0),
        on_call=records.append,
    )
    assert (await llm.chat(HI, ctx=CTX)).text == "whole"
    assert records[0].attempts[0].kind == "timeout"
    await llm.aclose()


@by_dialect
async def test_streamed_tool_calls_arrive_whole(dialect: Dialect, server: WireServer) -> None:
    args = {"path": "kernels.cu", "content": "x" * 3000}
    server.push(dialect.tool_call("run", args, call_id="call_9"))
    llm = llm_for(dialect, server)
    response = await llm.chat(HI, [TOOL], ctx=CTX)
    assert response.stop_reason == "tool_use" and response.tool_calls[0].arguments == args
    await llm.aclose()


# -- reasoning ---------------------------------------------------------------------------------


def _with_reasoning(dialect: Dialect, answer: str, thinking: str) -> Reply:
    if dialect.provider in ("openai", "cerit"):
        reply = dialect._completion({"content": answer, "reasoning_content": thinking}, "stop", (100, 50, 0))
        reply.body["usage"]["completion_tokens_details"] = {"reasoning_tokens": 30}
        return reply
    if dialect.provider == "anthropic":
        blocks = [{"type": "thinking", "thinking": thinking, "signature": "sig"}]
        return dialect._message(
            blocks + ([{"type": "text", "text": answer}] if answer else []), "end_turn", (100, 50, 0)
        )
    reply = dialect._response([{"text": thinking, "thought": True}] + ([{"text": answer}] if answer else []), "STOP")
    reply.body["usageMetadata"]["thoughtsTokenCount"] = 30
    return reply


@by_dialect
async def test_reasoning_text_is_kept_and_used_when_the_content_is_empty(dialect: Dialect, server: WireServer) -> None:
    server.push(_with_reasoning(dialect, "tile it", "first think about reuse"), _with_reasoning(dialect, "", "tile it"))
    records = []
    llm = llm_for(dialect, server, on_call=records.append)
    first = await llm.chat(HI, ctx=CTX)
    assert first.text == "tile it" and first.reasoning == "first think about reuse"
    assert "first think" not in first.to_message().content  # never sent back as text
    second = await llm.chat(HI, ctx=CTX)
    assert second.text == "tile it"  # the reasoning stands in for the empty content
    assert "reasoning text is used as the content" in " ".join(records[1].notes)
    if dialect.provider != "anthropic":  # counted by the API, billed as output
        assert first.usage.reasoning_tokens == 30
        assert llm.usage.run.reasoning_tokens == 60
    await llm.aclose()


def test_an_output_limit_leaves_room_for_the_reasoning() -> None:
    gpt = model_info("openai", "gpt-6.1-sol")
    assert gpt.reasons and gpt.output_limit(16384, None) == 16384 + 16384  # thinks by default
    assert gpt.output_limit(16384, "high") == 16384 + 32768
    assert model_info("openai", "qwen2.5-coder").output_limit(16384, None) == 16384
    assert ModelInfo(max_output=20_000, reasoning="effort").output_limit(16384, "high") == 20_000


async def test_openai_gets_reasoning_effort_and_room_in_the_limit(server: WireServer) -> None:
    d = DIALECTS["openai"]
    server.push(d.text("ok"))
    settings = LLMSettings(reasoning="low", steps={"author": StepConfig(reasoning="high")})
    llm = llm_for(d, server, info=model_info("openai", d.model), settings=settings, max_tokens=1000)
    await llm.chat(HI, ctx=CTX)
    await llm.aclose()
    body = server.requests[0].body
    assert body["reasoning_effort"] == "high" and body["max_tokens"] == 1000 + 32768


async def test_openai_sends_no_temperature_with_a_reasoning_effort(server: WireServer) -> None:
    from cacao_tui.llm.registry import Temperatures

    d = DIALECTS["openai"]
    server.push(d.text("ok"), d.text("ok"))
    temps = Temperatures(0.3, 0.0)
    plain = llm_for(d, server, info=model_info("openai", "gpt-5.4"), temperatures=temps)
    await plain.chat(HI, ctx=CTX)
    asked = llm_for(d, server, info=model_info("openai", "gpt-5.4"), temperatures=temps,
                    settings=LLMSettings(reasoning="low"))  # fmt: skip
    await asked.chat(HI, ctx=CTX)
    first, second = (r.body for r in server.requests)
    assert first["temperature"] == 0.0 and "reasoning_effort" not in first
    assert second["reasoning_effort"] == "low" and "temperature" not in second
    for llm in (plain, asked):
        await llm.aclose()


async def test_anthropic_thinking_by_effort_or_budget(server: WireServer) -> None:
    d = DIALECTS["anthropic"]
    server.push(d.text("ok"), d.text("ok"))
    adaptive = llm_for(
        d, server, info=model_info("anthropic", "claude-sonnet-5-5"), settings=LLMSettings(reasoning="medium")
    )
    await adaptive.chat(HI, ctx=CTX, system="s")
    budget = llm_for(
        d, server, info=model_info("anthropic", "claude-sonnet-4-5"), settings=LLMSettings(reasoning="low")
    )
    await budget.chat(HI, ctx=CTX, system="s")
    first, second = (r.body for r in server.requests)
    assert first["thinking"] == {"type": "adaptive"} and first["output_config"] == {"effort": "medium"}
    assert second["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert second["max_tokens"] > 2048 and "temperature" not in second
    for llm in (adaptive, budget):
        await llm.aclose()


async def test_gemini_thinking_config_by_level_or_budget(server: WireServer) -> None:
    d = DIALECTS["gemini"]
    server.push(d.text("ok"), d.text("ok"))
    level = llm_for(
        d, server, info=model_info("gemini", "gemini-3.1-pro-preview"), settings=LLMSettings(reasoning="high")
    )
    await level.chat(HI, ctx=CTX)
    budget = llm_for(d, server, info=model_info("gemini", "gemini-2.5-flash"), settings=LLMSettings(reasoning="low"))
    await budget.chat(HI, ctx=CTX)
    first, second = ({k.replace("_", ""): v for k, v in r.body["generationConfig"]["thinkingConfig"].items()}
                     for r in server.requests)  # fmt: skip
    assert {k.lower(): v for k, v in first.items()} == {"includethoughts": True, "thinkinglevel": "HIGH"}
    assert {k.lower(): v for k, v in second.items()} == {"includethoughts": True, "thinkingbudget": 2048}
    for llm in (level, budget):
        await llm.aclose()


# -- structured output -------------------------------------------------------------------------


@by_dialect
async def test_native_structured_output_where_the_model_has_it(dialect: Dialect, server: WireServer) -> None:
    if dialect.provider == "anthropic":  # a forced tool: the answer is its input
        answer = {"type": "tool_use", "id": "t1", "name": "Verdict", "input": {"action": "stop", "reason": "done"}}
        server.push(dialect._message([answer], "tool_use", (9, 9, 0)))
    else:
        server.push(dialect.text('{"action": "stop", "reason": "done", "feedback": null}'))
    llm = llm_for(dialect, server, info=model_info(dialect.provider, dialect.model))
    verdict = await llm.structured(HI, Verdict, ctx=CTX)
    assert verdict == Verdict(action="stop", reason="done")
    body = server.requests[0].body
    if dialect.provider in ("openai", "cerit"):
        fmt = body["response_format"]
        assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
        schema = fmt["json_schema"]["schema"]
        assert schema["additionalProperties"] is False and set(schema["required"]) == {"action", "reason", "feedback"}
    elif dialect.provider == "anthropic":
        assert body["tool_choice"] == {"type": "tool", "name": "Verdict"}
        assert body["tools"][-1]["input_schema"]["properties"].keys() >= {"action", "reason"}
    else:
        assert body["generationConfig"]["responseJsonSchema"]["required"] == ["action", "reason", "feedback"]
    # The schema is stated once (issue 28): as the response format / answer tool, not in the prompt too.
    text = " ".join(dialect.sent_texts(body))
    assert "JSON schema" not in text and '"properties"' not in text
    assert "as the response format's schema describes it" in text
    await llm.aclose()


async def test_a_server_refusing_the_response_format_is_asked_again_without_it(server: WireServer) -> None:
    d = DIALECTS["openai"]
    server.push(
        d.error(400, "response_format json_schema is not supported by this server"),
        d.text('{"action": "stop", "reason": "done"}'),
        d.text('{"action": "go", "reason": "again"}'),
    )
    records = []
    llm = llm_for(d, server, info=model_info("openai", "local-model"), on_call=records.append)
    assert (await llm.structured(HI, Verdict, ctx=CTX)).action == "stop"
    assert (await llm.structured(HI, Verdict, ctx=CTX)).action == "go"
    sent = [r.body for r in server.requests]
    assert "response_format" in sent[0] and "response_format" not in sent[1] and "response_format" not in sent[2]
    assert "refused the structured parameter" in " ".join(records[0].notes)
    # Without the response format, the schema goes into the prompt (the same one), and only there.
    for body in sent[1:]:
        text = " ".join(d.sent_texts(body))
        assert "JSON schema" in text and '"required"' in text and "response format's schema" not in text
    await llm.aclose()


async def test_anthropic_with_thinking_offers_the_answer_tool_without_forcing_it(server: WireServer) -> None:
    d = DIALECTS["anthropic"]
    server.push(d.text('{"action": "stop", "reason": "done"}'))
    llm = llm_for(d, server, info=model_info("anthropic", d.model), settings=LLMSettings(reasoning="low"))
    assert (await llm.structured(HI, Verdict, ctx=CTX)).action == "stop"
    assert server.requests[0].body["tool_choice"] == {"type": "auto"}
    await llm.aclose()


# -- caching -----------------------------------------------------------------------------------


async def test_anthropic_breakpoints_on_the_prefix_and_rolling_in_a_tool_loop(server: WireServer) -> None:
    d = DIALECTS["anthropic"]
    server.push(d.text("a"), d.text("b"))
    llm = llm_for(d, server)
    opening = [Message(role="user", content="brief", cache_prefix=True), Message(role="user", content="the task")]
    loop = [
        *opening,
        Message(role="assistant", content="", tool_calls=[{"id": "t1", "name": "run", "arguments": {}}]),
        Message(role="tool", tool_call_id="t1", content="out 1"),
        Message(role="assistant", content="", tool_calls=[{"id": "t2", "name": "run", "arguments": {}}]),
        Message(role="tool", tool_call_id="t2", content="out 2"),
    ]
    await llm.chat(opening, ctx=CTX, system="sys")  # no tools: the prefix only
    await llm.chat(loop, [TOOL], ctx=CTX, system="sys")
    single, looped = (r.body for r in server.requests)

    def marked(body: dict) -> list[str]:
        found = ["system"] if "cache_control" in body["system"][-1] else []
        for i, turn in enumerate(body["messages"]):
            found += [f"{i}:{j}" for j, b in enumerate(turn["content"]) if "cache_control" in b]
        return found

    assert marked(single) == ["system", "0:0"]
    assert marked(looped) == ["system", "0:0", "2:0", "4:0"]  # prefix, then the two newest user turns
    # Two stable prefixes (the run's, then a branch's plan): both marked, then the newest turns; the
    # system prompt only where one of the four is left (the later marks cache it with them).
    server.push(d.text("c"), d.text("d"))
    two = [
        Message(role="user", content="brief", cache_prefix=True),
        Message(role="user", content="plan", cache_prefix=True),
        Message(role="user", content="the task"),
    ]
    await llm.chat(two, [TOOL], ctx=CTX, system="sys")
    await llm.chat([*two, *loop[2:]], [TOOL], ctx=CTX, system="sys")
    first, later = (r.body for r in server.requests[2:])
    assert marked(first) == ["system", "0:0", "0:1", "0:2"]
    assert marked(later) == ["0:0", "0:1", "2:0", "4:0"]
    await llm.aclose()


def test_openai_prompt_cache_key_only_to_api_openai_com() -> None:
    from cacao_tui.llm.openai_adapter import OpenAIProvider
    from cacao_tui.llm.provider import ChatRequest
    from cacao_tui.llm.types import CallKey

    request = ChatRequest(key=CallKey("b1", 1, "author", 0), messages=HI, cache_key="cacao-abc")
    assert OpenAIProvider("gpt-6.1-sol", api_key="k")._kwargs(request)["prompt_cache_key"] == "cacao-abc"
    local = OpenAIProvider("m", api_key="k", base_url="http://127.0.0.1:1/v1")._kwargs(request)
    assert "prompt_cache_key" not in local


async def test_a_cache_key_per_branch_and_consecutive_user_turns_as_one(server: WireServer) -> None:
    d = DIALECTS["openai"]
    server.push(d.text("a"), d.text("b"))
    keys = []
    llm = llm_for(d, server, cache_scope="mmul", on_call=lambda r: keys.append(r.cache_key))
    two = [Message(role="user", content="brief", cache_prefix=True), Message(role="user", content="task")]
    await llm.chat(two, ctx=CallContext("b1", 1, "plan"))
    await llm.chat(two, ctx=CallContext("b2", 1, "plan"))
    assert keys[0] != keys[1] and all(k and k.startswith("cacao-") for k in keys)
    sent = server.requests[0].body["messages"]
    assert [m["role"] for m in sent] == ["user"] and sent[0]["content"] == "brief\n\ntask"
    await llm.aclose()


@by_dialect
async def test_cached_tokens_are_read_and_priced_at_the_cache_rate(dialect: Dialect, server: WireServer) -> None:
    server.push(dialect.text("ok", usage=(200, 10, 800)))
    llm = llm_for(dialect, server)
    usage = (await llm.chat(HI, ctx=CTX)).usage
    assert usage.cached_tokens == 800 and usage.input_tokens == 1000
    price = price_for(dialect.provider, dialect.model)
    if price is not None:
        assert usage.cost_usd == pytest.approx((200 * price.input + 800 * price.cached_input + 10 * price.output) / 1e6)
    await llm.aclose()


# -- errors the wrapper acts on ----------------------------------------------------------------


@by_dialect
async def test_a_context_length_400_shrinks_and_is_sent_again_once(dialect: Dialect, server: WireServer) -> None:
    messages = {
        "openai": "This model's maximum context length is 8192 tokens, your messages resulted in 9000 tokens",
        "cerit": "This model's maximum context length is 8192 tokens, your messages resulted in 9000 tokens",
        "anthropic": "prompt is too long: 9000 tokens > 8192 maximum",
        "gemini": "The input token count (9000) exceeds the maximum number of tokens allowed (8192).",
    }
    server.push(dialect.error(400, messages[dialect.provider]), dialect.error(400, messages[dialect.provider]))
    records = []
    llm = llm_for(dialect, server, on_call=records.append)
    history = [Message(role="user", content="task " * 200)]
    for n in range(6):
        history += [
            Message(role="assistant", content="", tool_calls=[{"id": f"t{n}", "name": "run", "arguments": {}}]),
            Message(role="tool", tool_call_id=f"t{n}", content="output " * 800),
        ]
    with pytest.raises(Exception, match="HTTP 400"):
        await llm.chat(history, [TOOL], ctx=CTX)
    assert len(server.requests) == 2  # shrunk and sent again once, then the error stands
    [record] = records
    assert [a.kind for a in record.attempts] == ["context_length", "context_length"]
    assert "older tool results dropped" in " ".join(record.notes)
    assert llm.context_window == 8192  # learnt from the error
    await llm.aclose()
