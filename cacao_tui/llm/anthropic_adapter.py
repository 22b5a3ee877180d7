"""Anthropic Messages API with tool use, through the official ``anthropic`` SDK.

The SDK is imported when the provider is built, never at module import. Its own retries
are off (``max_retries=0``); the key may come from ``ANTHROPIC_API_KEY`` or the original's
``CLAUDE_API_KEY``; ``ANTHROPIC_BASE_URL`` is honoured (passed explicitly when
the selection found it, read by the SDK otherwise). Assistant turns keep the raw content
blocks (thinking blocks with their signatures included) in ``provider_data`` and send
them back verbatim, as the API requires during tool use.

Replies stream (the raw events are read here, so a tool call's arguments are parsed
strictly once complete: arguments cut off at the output limit are an error, not a guess).
Prompt caching: breakpoints at the end of each stable prefix (``Message.cache_prefix``:
the problem brief and the tuning-spec guide; a branch's plan, the same in each of its
authoring steps), rolling ones on the two newest user turns of a tool loop, so each turn
reads the previous turn's prefix from the cache, and on the system prompt (which caches
the tools before it) where one of the API's four is left. Structured calls force a tool
whose input schema is the answer's schema (``tool_choice``; with thinking on, where forcing
is not allowed, the tool is offered).
Reasoning: ``thinking`` with a budget, or adaptive thinking with ``output_config.effort``,
as the registry says of the model.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from cacao_tui.llm.context_fit import context_window_in, is_context_length_error
from cacao_tui.llm.errors import ProviderError
from cacao_tui.llm.models import THINKING_BUDGET
from cacao_tui.llm.provider import AdapterSetup, ChatRequest
from cacao_tui.llm.redaction import redact
from cacao_tui.llm.retry import is_retryable_status, parse_retry_after
from cacao_tui.llm.streamed_reply import close_stream
from cacao_tui.llm.tool_arguments import parse_tool_arguments
from cacao_tui.llm.transport import transport_error, transport_error_types
from cacao_tui.llm.types import ChatResponse, Message, StopReason, ToolCall, ToolSpec, Usage
from cacao_tui.llm.wire_bounds import ResponseTooLarge, http_client_for

if TYPE_CHECKING:
    from cacao_tui.llm.selection import ProviderChoice

CONTENT_KEY = "anthropic_content"
EMPTY_TURN = "(no reply)"
EPHEMERAL = {"type": "ephemeral"}
MAX_BREAKPOINTS = 4
_OPTIONAL = {"thinking": "reasoning", "output_config": "reasoning", "effort": "reasoning", "tool_choice": "structured"}

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end",
    "stop_sequence": "end",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
}


def create(choice: ProviderChoice, setup: AdapterSetup) -> AnthropicProvider:
    return AnthropicProvider(
        choice.model,
        api_key=setup.require_key(choice) or "",
        base_url=choice.base_url,
        timeout_s=setup.timeout_s,
        connect_timeout_s=setup.connect_timeout_s,
        key_var=choice.key_var or setup.entry.key_vars[0],
    )


class AnthropicProvider:
    name = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        api_key: str,
        base_url: str | None = None,
        timeout_s: float = 300.0,
        connect_timeout_s: float = 15.0,
        key_var: str = "ANTHROPIC_API_KEY",
    ) -> None:
        import anthropic

        self._sdk = anthropic
        self.model = model
        self._key_var = key_var
        timeout = anthropic.Timeout(timeout_s, connect=min(connect_timeout_s, timeout_s))
        http_client = http_client_for(anthropic.DefaultAsyncHttpxClient, timeout=timeout)  # llm/wire_bounds.py
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout, http_client=http_client
        )

    def _kwargs(self, request: ChatRequest) -> dict[str, Any]:
        system, messages = to_anthropic_messages(request.messages, request.system)
        kwargs: dict[str, Any] = {"model": self.model, "max_tokens": request.max_tokens, "messages": messages}
        if system:
            kwargs["system"] = [{"type": "text", "text": system}]
        tools = [to_anthropic_tool(t) for t in request.tools]
        thinking = self._thinking(request, kwargs)
        if request.schema is not None and request.info.structured != "prompt" and not request.tools:
            tools.append(
                {"name": _tool_name(request.schema_name), "description": ANSWER_TOOL, "input_schema": request.schema}
            )
            # Forcing a tool is not allowed while thinking: then it is offered, and the prompt asks for it.
            name = _tool_name(request.schema_name)
            kwargs["tool_choice"] = {"type": "auto"} if thinking else {"type": "tool", "name": name}
        if tools:
            kwargs["tools"] = tools
        if request.temperature is not None and not thinking:
            kwargs["temperature"] = request.temperature
        place_breakpoints(kwargs, request.messages, tool_loop=bool(request.tools))
        return kwargs

    def _thinking(self, request: ChatRequest, kwargs: dict[str, Any]) -> bool:
        """Set the reasoning control; True when thinking is on."""
        effort = request.reasoning
        control = request.info.reasoning
        if effort is None or control == "none":
            return False
        if control == "effort":
            kwargs["thinking"] = {"type": "adaptive"}
            kwargs["output_config"] = {"effort": effort}
            return True
        budget = min(THINKING_BUDGET[effort], max(1024, request.max_tokens - 1024))
        if request.max_tokens <= budget:
            return False  # no room for an answer after the thinking: leave it off
        kwargs["thinking"] = {"type": "enabled", "budget_tokens": budget}
        return True

    async def complete(self, request: ChatRequest) -> ChatResponse:
        sdk = self._sdk
        kwargs = self._kwargs(request)
        try:
            stream = await self._client.messages.create(**kwargs, stream=True)
            message = await read_stream(stream, request)
        except sdk.APITimeoutError:
            raise ProviderError("request timed out", kind="timeout", retryable=True) from None
        except transport_error_types() as exc:  # while the stream is read
            raise transport_error(exc) from None
        except ResponseTooLarge as exc:  # an error body past the bound
            raise ProviderError(str(exc), kind="response") from None
        except RecursionError:  # the SDK parsing an event nested past Python's limit
            raise ProviderError("the server sent JSON nested too deeply to read", kind="response") from None
        except sdk.APIConnectionError as exc:
            raise ProviderError(f"connection failed: {redact(str(exc))}", kind="connection", retryable=True) from None
        except sdk.APIStatusError as exc:
            raise _status_error(exc, self._key_var, kwargs) from None
        response = message.gather.finish(from_anthropic_message(message, self.model))
        if "tool_choice" in kwargs:
            response = answer_from_tool(response, _tool_name(request.schema_name))
        return response

    async def count_tokens(self, request: ChatRequest) -> int | None:
        """The provider's count of the request's prompt tokens (messages, system, tools)."""
        kwargs = self._kwargs(request)
        args = {
            k: kwargs[k] for k in ("model", "messages", "system", "tools", "thinking", "tool_choice") if k in kwargs
        }
        counted = await self._client.messages.count_tokens(**args)
        return int(getattr(counted, "input_tokens", 0) or 0) or None

    async def aclose(self) -> None:
        await self._client.close()


ANSWER_TOOL = "Give your answer: call this tool once, with the answer as its input."


def _tool_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in name)[:64] or "answer"


def place_breakpoints(kwargs: dict[str, Any], messages: list[Message], *, tool_loop: bool) -> None:
    """Cache breakpoints, at most four, in the order they are needed: in a tool loop the newest
    user turn (the next turn reads up to it), the end of each stable prefix (``cache_prefix``
    messages, the last first: the problem brief and guide, a branch's plan), the previous user
    turn, then the system prompt (it caches the tools before it; a later breakpoint covers it too)."""
    turns = kwargs["messages"]
    users = [i for i, t in enumerate(turns) if t["role"] == "user" and t["content"]]
    wanted: list[tuple[int, int]] = []
    if tool_loop and users:
        wanted.append((users[-1], len(turns[users[-1]]["content"]) - 1))
    prefixes = [p for p in _prefix_turns(messages) if p[0] < len(turns) and p[1] < len(turns[p[0]]["content"])]
    wanted += reversed(prefixes)
    if tool_loop and len(users) > 1:
        wanted.append((users[-2], len(turns[users[-2]]["content"]) - 1))
    marks = 0
    for index, block in wanted:
        content = turns[index]["content"][block]
        if marks < MAX_BREAKPOINTS and "cache_control" not in content:
            content["cache_control"] = dict(EPHEMERAL)
            marks += 1
    if marks < MAX_BREAKPOINTS:
        if kwargs.get("system"):
            kwargs["system"][-1]["cache_control"] = dict(EPHEMERAL)
        elif kwargs.get("tools"):
            kwargs["tools"][-1]["cache_control"] = dict(EPHEMERAL)


def _prefix_turns(messages: list[Message]) -> list[tuple[int, int]]:
    """Where the ``cache_prefix`` messages land: (turn, block) of the converted request, in order."""
    turn, block, role = -1, -1, None
    found: list[tuple[int, int]] = []
    for m in messages:
        if m.role == "system":
            continue
        wire_role = "user" if m.role in ("user", "tool") else "assistant"
        if wire_role != role:
            turn, block, role = turn + 1, -1, wire_role
        block += 1 if m.role != "assistant" else max(1, len(m.tool_calls) + (1 if m.content else 0))
        if m.cache_prefix:
            found.append((turn, block))
    return found


def answer_from_tool(response: ChatResponse, name: str) -> ChatResponse:
    """A forced answer tool's input as the reply's text (the structured path reads text).
    The assistant turn is then rebuilt from that text: a repair turn must not carry a
    tool_use block without its result."""
    for call in response.tool_calls:
        if call.name == name:
            text = json.dumps(call.arguments, ensure_ascii=False) if call.error is None else response.text
            stop = "end" if response.stop_reason == "tool_use" else response.stop_reason
            rest = [c for c in response.tool_calls if c.name != name]
            return response.model_copy(
                update={"text": text, "tool_calls": rest, "stop_reason": stop, "provider_data": None}
            )
    return response


async def read_stream(stream: Any, request: ChatRequest) -> Any:
    """The raw event stream read into a message (a namespace shaped like the SDK's Message), kept
    within the reply caps as it arrives (llm/streamed_reply.py: past them reading stops); the
    gatherer is the message's ``gather``, for ``ReplyGatherer.finish``."""
    from types import SimpleNamespace as NS

    gather = request.gatherer()
    blocks: dict[int, dict[str, Any]] = {}
    raw_json: dict[int, list[str]] = {}
    message: Any = None
    stop_reason = None
    usage: dict[str, Any] = {}
    try:
        with gather.reading():  # past the caps the wire stops: ResponseTooLarge below
            async for event in stream:
                kind = getattr(event, "type", None)
                if kind == "message_start":
                    message = event.message
                    u = event.message.usage
                    usage.update({k: getattr(u, k, None) for k in ("input_tokens", "output_tokens",
                                  "cache_read_input_tokens", "cache_creation_input_tokens")})  # fmt: skip
                elif kind == "content_block_start":
                    blocks[event.index] = _started_block(event.content_block, gather)
                elif kind == "content_block_delta":
                    _add_delta(blocks.setdefault(event.index, {"type": "text", "text": ""}), event, gather, raw_json,
                               request)  # fmt: skip
                elif kind == "message_delta":
                    stop_reason = getattr(event.delta, "stop_reason", None) or stop_reason
                    u = getattr(event, "usage", None)
                    if u is not None and getattr(u, "output_tokens", None) is not None:
                        usage["output_tokens"] = u.output_tokens
                    details = getattr(u, "output_tokens_details", None) if u is not None else None
                    if details is not None:
                        usage["thinking_tokens"] = getattr(details, "thinking_tokens", 0)
    except ResponseTooLarge as exc:
        if message is None or not blocks:
            raise ProviderError(str(exc), kind="response") from None
        gather.stop(str(exc))
    finally:
        if gather.full:
            await close_stream(stream)
    if message is None:
        raise ProviderError("the stream ended without a message", kind="response", retryable=True)
    content = []
    for index in sorted(blocks):
        block = blocks[index]
        if block.get("type") == "tool_use":
            dropped = gather.dropped(index)
            if dropped is not None:
                block["input"], block["cacao_error"] = {}, dropped
            elif index in raw_json:
                block["input"] = "".join(raw_json[index])  # parsed strictly by from_anthropic_message
        content.append(_as_block(block))
    return NS(
        content=content,
        stop_reason=stop_reason,
        usage=NS(
            input_tokens=usage.get("input_tokens") or 0,
            output_tokens=usage.get("output_tokens") or 0,
            cache_read_input_tokens=usage.get("cache_read_input_tokens") or 0,
            cache_creation_input_tokens=usage.get("cache_creation_input_tokens") or 0,
            output_tokens_details=NS(thinking_tokens=usage.get("thinking_tokens") or 0),
        ),
        model=getattr(message, "model", None),
        gather=gather,
    )


def _started_block(content_block: Any, gather: Any) -> dict[str, Any]:
    """A content block as it starts: text it already holds counts against the caps."""
    block = content_block.to_dict() if hasattr(content_block, "to_dict") else dict(content_block)
    if isinstance(block.get("text"), str):
        block["text"] = gather.text(block["text"])
    for key in ("thinking", "signature", "data"):
        if isinstance(block.get(key), str):
            gather.signed(len(block[key]))
    return block


def _add_delta(block: dict[str, Any], event: Any, gather: Any, raw_json: dict[int, list[str]],
               request: ChatRequest) -> None:  # fmt: skip
    delta = event.delta
    dkind = getattr(delta, "type", None)
    if dkind == "text_delta":
        block["text"] = block.get("text", "") + gather.text(delta.text)
        request.delta(text=delta.text)
    elif dkind == "thinking_delta":  # signed: kept whole, counted (past the bound, reading stops)
        gather.signed(len(delta.thinking))
        block["thinking"] = block.get("thinking", "") + delta.thinking
        request.delta(reasoning=delta.thinking)
    elif dkind == "signature_delta":
        gather.signed(len(delta.signature))
        block["signature"] = block.get("signature", "") + delta.signature
    elif dkind == "input_json_delta":
        if gather.arguments(event.index, delta.partial_json):
            raw_json.setdefault(event.index, []).append(delta.partial_json)
        else:
            raw_json.pop(event.index, None)
        request.delta(tool_chars=len(delta.partial_json))


def _as_block(block: dict[str, Any]) -> Any:
    from types import SimpleNamespace as NS

    return NS(**block)


def _status_error(exc: Any, key_var: str, sent: dict[str, Any] | None = None) -> ProviderError:
    status = exc.status_code
    kind = getattr(exc, "type", None) or ""
    detail = getattr(exc, "api_message", None) or str(exc)
    # Redacted before it is cut short, so a key echoed by the server cannot survive in part.
    full = " ".join(redact(str(detail)).split())
    text = f"HTTP {status}" + (f" {kind}" if kind else "") + f": {full[:300]}"
    if status in (401, 403):
        text += f" (check {key_var})"
    if is_context_length_error(status, full):
        return ProviderError(text, status=status, kind="context_length", context_window=context_window_in(full))
    if status == 400 and sent:
        for name, param in _OPTIONAL.items():
            if name in full and name.split("_")[0] in " ".join(sent):
                return ProviderError(text, status=status, kind="unsupported", param=param)
    return ProviderError(
        text,
        status=status,
        retryable=is_retryable_status(status),
        retry_after_s=parse_retry_after(exc.response.headers),
    )


def to_anthropic_tool(tool: ToolSpec) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}


def to_anthropic_messages(messages: list[Message], system: str | None) -> tuple[str | None, list[dict[str, Any]]]:
    """System text (the ``system`` argument plus any system messages) and the turns, with
    consecutive same-role turns merged and tool results folded into user turns."""
    systems = [system] if system else []
    turns: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": list(blocks)})

    for m in messages:
        if m.role == "system":
            if m.content:
                systems.append(m.content)
        elif m.role == "user":
            add("user", [{"type": "text", "text": m.content or EMPTY_TURN}])
        elif m.role == "tool":
            add(
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": m.tool_call_id,
                        "content": m.content or "(no output)",
                        "is_error": m.is_error,
                    }
                ],
            )
        else:
            add("assistant", _assistant_blocks(m))
    return ("\n\n".join(systems) or None), turns


def _assistant_blocks(m: Message) -> list[dict[str, Any]]:
    raw = (m.provider_data or {}).get(CONTENT_KEY)
    if isinstance(raw, list) and raw:
        return [dict(b) for b in raw]
    blocks: list[dict[str, Any]] = []
    if m.content:
        blocks.append({"type": "text", "text": m.content})
    for call in m.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name or "invalid", "input": call.arguments})
    return blocks or [{"type": "text", "text": EMPTY_TURN}]


def _block_param(block: Any) -> dict[str, Any] | None:
    kind = getattr(block, "type", None)
    if kind == "text":
        return {"type": "text", "text": block.text}
    if kind == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if kind == "thinking":
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": block.data}
    return None  # server-tool blocks: we offer no server tools


def from_anthropic_message(message: Any, model: str) -> ChatResponse:
    text_parts: list[str] = []
    thinking: list[str] = []
    calls: list[ToolCall] = []
    raw_blocks: list[dict[str, Any]] = []
    for block in message.content or []:
        kind = getattr(block, "type", None)
        if kind == "tool_use":
            dropped = getattr(block, "cacao_error", None)  # over the reply cap while it streamed
            arguments, error = ({}, dropped) if dropped else parse_tool_arguments(block.input)
            calls.append(ToolCall(id=block.id, name=block.name, arguments=arguments, error=error))
            block = _with_input(block, arguments)
        param = _block_param(block)
        if param is not None:
            raw_blocks.append(param)
        if kind == "text":
            text_parts.append(block.text)
        elif kind == "thinking":
            thinking.append(getattr(block, "thinking", "") or "")
    raw_reason = message.stop_reason or ""
    stop = _STOP_REASONS.get(raw_reason, "other")
    if calls and stop == "end":
        stop = "tool_use"
    usage = message.usage
    cache_read = getattr(usage, "cache_read_input_tokens", 0) or 0
    cache_write = getattr(usage, "cache_creation_input_tokens", 0) or 0
    details = getattr(usage, "output_tokens_details", None)
    return ChatResponse(
        text="".join(text_parts),
        tool_calls=calls,
        stop_reason=stop,
        raw_stop_reason=raw_reason or None,
        usage=Usage(
            input_tokens=(usage.input_tokens or 0) + cache_read + cache_write,
            output_tokens=usage.output_tokens or 0,
            cached_tokens=cache_read,
            cache_write_tokens=cache_write,
            reasoning_tokens=getattr(details, "thinking_tokens", 0) or 0,
        ),
        model=getattr(message, "model", None) or model,
        provider_data={CONTENT_KEY: raw_blocks} if raw_blocks else None,
        reasoning="\n\n".join(t for t in thinking if t),
    )


def _with_input(block: Any, arguments: dict[str, Any]) -> Any:
    """A tool_use block as it goes back to the API: its input as the object we parsed
    (a streamed block holds the raw JSON text until then)."""
    from types import SimpleNamespace as NS

    if isinstance(getattr(block, "input", None), dict):
        return block
    return NS(type="tool_use", id=block.id, name=block.name, input=arguments)
