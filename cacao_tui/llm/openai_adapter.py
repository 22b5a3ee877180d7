"""OpenAI Chat Completions with tools, through the official ``openai`` SDK.

The same adapter serves CERIT (``CERIT_API_KEY`` + ``CERIT_API_BASE``) and any
OpenAI-compatible server (vLLM, Ollama, llama.cpp) reached through ``OPENAI_BASE_URL``;
such a server may need no key, so a placeholder is sent. The SDK is imported when the
provider is built, with its own retries off.

The output limit goes out as ``max_completion_tokens`` to api.openai.com (its reasoning
models refuse ``max_tokens``) and as ``max_tokens`` to every other server, which is what
compatible servers have long understood.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from cacao_tui.llm.errors import LLMError, ProviderError
from cacao_tui.llm.provider import AdapterSetup, ChatRequest
from cacao_tui.llm.redaction import redact
from cacao_tui.llm.retry import is_retryable_status, parse_retry_after
from cacao_tui.llm.tool_arguments import parse_tool_arguments
from cacao_tui.llm.types import ChatResponse, Message, StopReason, ToolCall, ToolSpec, Usage

if TYPE_CHECKING:
    from cacao_tui.llm.selection import ProviderChoice

KEYLESS_PLACEHOLDER = "not-needed"

_FINISH_REASONS: dict[str, StopReason] = {
    "stop": "end",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
}


def is_official_endpoint(base_url: str | None) -> bool:
    return base_url is None or "api.openai.com" in base_url


def create(choice: ProviderChoice, setup: AdapterSetup) -> OpenAIProvider:
    """For every OpenAI-compatible registry entry (openai, cerit, ...)."""
    entry = setup.entry
    if entry.base_required and not choice.base_url:
        raise LLMError(f"--provider {entry.name} needs {entry.base_var} (the endpoint URL)")
    return OpenAIProvider(
        choice.model,
        api_key=setup.require_key(choice),
        base_url=choice.base_url,
        timeout_s=setup.timeout_s,
        connect_timeout_s=setup.connect_timeout_s,
        name=entry.name,
        key_var=choice.key_var or (entry.key_vars[0] if entry.key_vars else "the API key"),
    )


class OpenAIProvider:
    def __init__(
        self,
        model: str,
        *,
        api_key: str | None,
        base_url: str | None = None,
        timeout_s: float = 300.0,
        connect_timeout_s: float = 15.0,
        name: str = "openai",
        key_var: str = "OPENAI_API_KEY",
    ) -> None:
        import openai

        self._sdk = openai
        self.name = name
        self.model = model
        self._key_var = key_var
        self._token_param = "max_completion_tokens" if is_official_endpoint(base_url) else "max_tokens"
        self._client = openai.AsyncOpenAI(
            api_key=api_key or KEYLESS_PLACEHOLDER,
            base_url=base_url,
            max_retries=0,
            timeout=openai.Timeout(timeout_s, connect=min(connect_timeout_s, timeout_s)),
        )

    async def complete(self, request: ChatRequest) -> ChatResponse:
        sdk = self._sdk
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai_messages(request.messages, request.system),
            self._token_param: request.max_tokens,
        }
        if request.tools:
            kwargs["tools"] = [to_openai_tool(t) for t in request.tools]
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        try:
            completion = await self._client.chat.completions.create(**kwargs)
        except sdk.APITimeoutError:
            raise ProviderError("request timed out", kind="timeout", retryable=True) from None
        except sdk.APIConnectionError as exc:
            raise ProviderError(f"connection failed: {redact(str(exc))}", kind="connection", retryable=True) from None
        except sdk.APIStatusError as exc:
            raise self._status_error(exc) from None
        return from_openai_completion(completion, self.model)

    def _status_error(self, exc: Any) -> ProviderError:
        status = exc.status_code
        body = getattr(exc, "body", None)
        detail = body.get("message") if isinstance(body, dict) else None
        # Redacted before it is cut short, so a key echoed by the server cannot survive in part.
        text = f"HTTP {status}: {' '.join(redact(str(detail or exc.message)).split())[:300]}"
        if status in (401, 403):
            text += f" (check {self._key_var})"
        return ProviderError(
            text,
            status=status,
            retryable=is_retryable_status(status),
            retry_after_s=parse_retry_after(exc.response.headers),
        )

    async def aclose(self) -> None:
        await self._client.close()


def to_openai_tool(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    }


def to_openai_messages(messages: list[Message], system: str | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for m in messages:
        if m.role in ("system", "user"):
            out.append({"role": m.role, "content": m.content})
        elif m.role == "tool":
            content = m.content or "(no output)"
            if m.is_error and not content.lower().startswith("error"):
                content = f"Error: {content}"
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": content})
        else:
            turn: dict[str, Any] = {"role": "assistant", "content": m.content}
            if m.tool_calls:
                # Malformed arguments go back as {} (some servers' chat templates parse them);
                # the tool error sent next tells the model what was wrong.
                turn["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)},
                    }
                    for c in m.tool_calls
                ]
            out.append(turn)
    return out


def from_openai_completion(completion: Any, model: str) -> ChatResponse:
    choices = getattr(completion, "choices", None) or []
    if not choices:
        raise ProviderError("the server returned no choices", kind="response", retryable=True)
    choice = choices[0]
    message = choice.message
    calls: list[ToolCall] = []
    for n, call in enumerate(getattr(message, "tool_calls", None) or []):
        function = getattr(call, "function", None)
        if function is None:  # a non-function (custom) tool call: not something we offered
            continue
        arguments, error = parse_tool_arguments(function.arguments)
        calls.append(ToolCall(id=call.id or f"call_{n}", name=function.name or "", arguments=arguments, error=error))
    raw_reason = choice.finish_reason or ""
    stop = _FINISH_REASONS.get(raw_reason, "other")
    if calls and stop == "end":
        stop = "tool_use"
    text = _text_of(message.content)
    refusal = getattr(message, "refusal", None)
    if refusal and not text and not calls:
        text, stop, raw_reason = str(refusal), "other", "refusal"
    usage = getattr(completion, "usage", None)
    details = getattr(usage, "prompt_tokens_details", None)
    return ChatResponse(
        text=text,
        tool_calls=calls,
        stop_reason=stop,
        raw_stop_reason=raw_reason or None,
        usage=Usage(
            input_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            output_tokens=getattr(usage, "completion_tokens", 0) or 0,
            cached_tokens=getattr(details, "cached_tokens", 0) or 0,
        ),
        model=getattr(completion, "model", None) or model,
    )


def _text_of(content: Any) -> str:
    """Message content as text; a few compatible servers send a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return str(content)
