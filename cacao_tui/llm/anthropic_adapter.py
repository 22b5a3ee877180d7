"""Anthropic Messages API with tool use, through the official ``anthropic`` SDK.

The SDK is imported when the provider is built, never at module import. Its own retries
are off (``max_retries=0``); the key may come from ``ANTHROPIC_API_KEY`` or the original's
``CLAUDE_API_KEY``; ``ANTHROPIC_BASE_URL`` is honoured (passed explicitly when
the selection found it, read by the SDK otherwise). Assistant turns keep the raw content
blocks (thinking blocks with their signatures included) in ``provider_data`` and send
them back verbatim, as the API requires during tool use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cacao_tui.llm.errors import ProviderError
from cacao_tui.llm.provider import AdapterSetup, ChatRequest
from cacao_tui.llm.redaction import redact
from cacao_tui.llm.retry import is_retryable_status, parse_retry_after
from cacao_tui.llm.tool_arguments import parse_tool_arguments
from cacao_tui.llm.types import ChatResponse, Message, StopReason, ToolCall, ToolSpec, Usage

if TYPE_CHECKING:
    from cacao_tui.llm.selection import ProviderChoice

CONTENT_KEY = "anthropic_content"
EMPTY_TURN = "(no reply)"

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
        self._client = anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout)

    async def complete(self, request: ChatRequest) -> ChatResponse:
        sdk = self._sdk
        system, messages = to_anthropic_messages(request.messages, request.system)
        kwargs: dict[str, Any] = {"model": self.model, "max_tokens": request.max_tokens, "messages": messages}
        if system:
            # Cache the tools + system prefix: it repeats on every turn of a tool loop.
            kwargs["system"] = [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]
        if request.tools:
            kwargs["tools"] = [to_anthropic_tool(t) for t in request.tools]
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        try:
            message = await self._client.messages.create(**kwargs)
        except sdk.APITimeoutError:
            raise ProviderError("request timed out", kind="timeout", retryable=True) from None
        except sdk.APIConnectionError as exc:
            raise ProviderError(f"connection failed: {redact(str(exc))}", kind="connection", retryable=True) from None
        except sdk.APIStatusError as exc:
            raise _status_error(exc, self._key_var) from None
        return from_anthropic_message(message, self.model)

    async def aclose(self) -> None:
        await self._client.close()


def _status_error(exc: Any, key_var: str) -> ProviderError:
    status = exc.status_code
    kind = getattr(exc, "type", None) or ""
    detail = getattr(exc, "api_message", None) or str(exc)
    # Redacted before it is cut short, so a key echoed by the server cannot survive in part.
    text = f"HTTP {status}" + (f" {kind}" if kind else "") + f": {' '.join(redact(str(detail)).split())[:300]}"
    if status in (401, 403):
        text += f" (check {key_var})"
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
    calls: list[ToolCall] = []
    raw_blocks: list[dict[str, Any]] = []
    for block in message.content or []:
        param = _block_param(block)
        if param is not None:
            raw_blocks.append(param)
        if getattr(block, "type", None) == "text":
            text_parts.append(block.text)
        elif getattr(block, "type", None) == "tool_use":
            arguments, error = parse_tool_arguments(block.input)
            calls.append(ToolCall(id=block.id, name=block.name, arguments=arguments, error=error))
    raw_reason = message.stop_reason or ""
    stop = _STOP_REASONS.get(raw_reason, "other")
    if calls and stop == "end":
        stop = "tool_use"
    usage = message.usage
    cache_read = usage.cache_read_input_tokens or 0
    cache_write = usage.cache_creation_input_tokens or 0
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
        ),
        model=getattr(message, "model", None) or model,
        provider_data={CONTENT_KEY: raw_blocks} if raw_blocks else None,
    )
