"""What only one provider does: thinking blocks, thought signatures, token parameters,
endpoint variables read by the SDKs themselves."""

from __future__ import annotations

import pytest
from wire_servers import DIALECTS, Reply, WireServer

from cacao_tui.llm import CallContext, Message, ProviderChoice, ToolSpec, TrackedLLM, price_for
from cacao_tui.llm.factory import build_provider

CTX = CallContext(None, None, "analyze")
TOOL = ToolSpec(name="run", description="Run it.", parameters={"type": "object", "properties": {}})


async def test_anthropic_sends_thinking_blocks_back_and_caches_the_system_prompt(server: WireServer) -> None:
    d = DIALECTS["anthropic"]
    thinking = {"type": "thinking", "thinking": "Plan: run it.", "signature": "sig-123"}
    tool_use = {"type": "tool_use", "id": "toolu_1", "name": "run", "input": {}}
    first = d._message([thinking, tool_use], "tool_use", (10, 5, 0))
    first.body["usage"].update({"cache_read_input_tokens": 1000, "cache_creation_input_tokens": 200})
    server.push(first, d.text("done"))
    llm = TrackedLLM(d.build(server), price=price_for("anthropic", d.model))

    messages = [Message(role="user", content="go")]
    response = await llm.chat(messages, [TOOL], ctx=CTX, system="be brief")
    assert response.usage.input_tokens == 1210 and response.usage.cached_tokens == 1000
    # $2/M fresh, $0.20/M cache read, $2.50/M cache write, $10/M output.
    assert response.usage.cost_usd == pytest.approx((10 * 2 + 1000 * 0.2 + 200 * 2.5 + 5 * 10) / 1e6)

    messages += [response.to_message(), Message(role="tool", tool_call_id="toolu_1", content="ok")]
    await llm.chat(messages, [TOOL], ctx=CTX, system="be brief")
    sent = server.requests[1].body
    assert sent["messages"][1] == {"role": "assistant", "content": [thinking, tool_use]}
    assert sent["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert "max_retries" not in sent and sent["max_tokens"] == 16384
    await llm.aclose()


async def test_anthropic_sdk_reads_anthropic_base_url(server: WireServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    server.push(DIALECTS["anthropic"].text("hi"))
    choice = ProviderChoice("anthropic", "claude-sonnet-5-5", "test", "ANTHROPIC_API_KEY")
    llm = TrackedLLM(build_provider(choice, env={"ANTHROPIC_API_KEY": "k"}))
    assert (await llm.chat([Message(role="user", content="x")], ctx=CTX)).text == "hi"
    assert server.requests[0].path == "/v1/messages"
    await llm.aclose()


async def test_gemini_keeps_thought_signatures_and_reads_retry_info(server: WireServer) -> None:
    d = DIALECTS["gemini"]
    quota = {
        "error": {
            "code": 429,
            "message": "Resource exhausted",
            "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}],
        }
    }
    server.push(Reply(429, quota), d.tool_call("run", {}, call_id="fc_1"), d.text("done"))
    waits: list[float] = []

    async def record_wait(seconds: float) -> None:
        waits.append(seconds)

    from cacao_tui.llm import RetryPolicy

    llm = TrackedLLM(d.build(server), retry=RetryPolicy(sleep=record_wait))
    messages = [Message(role="user", content="go")]
    response = await llm.chat(messages, [TOOL], ctx=CTX)
    assert waits == [7.0]
    messages += [response.to_message(), Message(role="tool", tool_call_id="fc_1", content="ok")]
    await llm.chat(messages, [TOOL], ctx=CTX)
    model_turn = server.requests[2].body["contents"][1]
    assert model_turn["role"] == "model"
    assert model_turn["parts"][0]["thoughtSignature"] == "c2lnbmF0dXJl"
    assert model_turn["parts"][0]["functionCall"]["id"] == "fc_1"
    await llm.aclose()


async def test_gemini_asks_for_json_in_structured_calls(server: WireServer) -> None:
    from pydantic import BaseModel

    class Answer(BaseModel):
        ok: bool

    server.push(DIALECTS["gemini"].text('{"ok": true}'))
    llm = TrackedLLM(DIALECTS["gemini"].build(server))
    assert (await llm.structured([Message(role="user", content="x")], Answer, ctx=CTX)).ok
    assert server.requests[0].body["generationConfig"]["responseMimeType"] == "application/json"
    await llm.aclose()


async def test_gemini_sdk_reads_google_gemini_base_url(server: WireServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.url)
    server.push(DIALECTS["gemini"].text("hi"))
    choice = ProviderChoice("gemini", "gemini-3.1-pro-preview", "test", "GEMINI_API_KEY")  # no base_url passed
    llm = TrackedLLM(build_provider(choice, env={"GEMINI_API_KEY": "k"}))
    assert (await llm.chat([Message(role="user", content="x")], ctx=CTX)).text == "hi"
    assert server.requests[0].path.endswith("/models/gemini-3.1-pro-preview:streamGenerateContent?alt=sse")
    assert server.requests[0].headers.get("x-goog-api-key") == "k"
    await llm.aclose()


async def test_openai_compatible_server_without_a_key(server: WireServer) -> None:
    server.push(DIALECTS["openai"].text("hi"))
    choice = ProviderChoice("openai", "qwen2.5-coder", "test", None, base_url=server.url + "/v1")
    llm = TrackedLLM(build_provider(choice, env={}))
    assert (await llm.chat([Message(role="user", content="x")], ctx=CTX, max_tokens=77)).text == "hi"
    seen = server.requests[0]
    assert seen.path == "/v1/chat/completions"
    assert seen.headers.get("authorization") == "Bearer not-needed"
    # Compatible servers get max_tokens; only api.openai.com gets max_completion_tokens.
    assert seen.body["max_tokens"] == 77 and "max_completion_tokens" not in seen.body
    await llm.aclose()


def test_openai_official_endpoint_uses_max_completion_tokens() -> None:
    from cacao_tui.llm.openai_adapter import OpenAIProvider

    assert OpenAIProvider("gpt-6.1-sol", api_key="k")._token_param == "max_completion_tokens"
    assert OpenAIProvider("m", api_key="k", base_url="http://localhost:8000/v1")._token_param == "max_tokens"


def test_openai_refusal_and_list_content() -> None:
    from types import SimpleNamespace as NS

    from cacao_tui.llm.openai_adapter import from_openai_completion

    def completion(message: NS, finish: str = "stop") -> NS:
        return NS(choices=[NS(message=message, finish_reason=finish)], usage=None, model="m")

    refused = from_openai_completion(completion(NS(content=None, refusal="I can't help", tool_calls=None)), "m")
    assert (refused.text, refused.stop_reason, refused.raw_stop_reason) == ("I can't help", "other", "refusal")
    parts = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    assert from_openai_completion(completion(NS(content=parts, tool_calls=None)), "m").text == "ab"
