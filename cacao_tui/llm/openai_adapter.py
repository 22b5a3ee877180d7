"""OpenAI Chat Completions with tools, through the official ``openai`` SDK.

The same adapter serves CERIT (``CERIT_API_KEY`` + ``CERIT_API_BASE``) and any
OpenAI-compatible server (vLLM, Ollama, llama.cpp) reached through ``OPENAI_BASE_URL``;
such a server may need no key, so a placeholder is sent. The SDK is imported when the
provider is built, with its own retries off.

The output limit goes out as ``max_completion_tokens`` to api.openai.com (its reasoning
models refuse ``max_tokens``) and as ``max_tokens`` to every other server, which is what
compatible servers have long understood.

Replies stream (``stream_options.include_usage`` for the token counts). Reasoning goes
out as ``reasoning_effort``; what the server returns as ``reasoning_content`` (vLLM,
DeepSeek) or ``reasoning`` is kept as the reply's reasoning. Structured calls send a
strict ``json_schema`` response format. ``prompt_cache_key`` goes to api.openai.com only
(other servers may refuse unknown fields). A server that refuses ``response_format`` or
``reasoning_effort`` with a 400 is answered ``unsupported`` so the call goes again
without it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from cacao_tui.llm.context_fit import context_window_in, is_context_length_error
from cacao_tui.llm.errors import LLMError, ProviderError
from cacao_tui.llm.provider import AdapterSetup, ChatRequest
from cacao_tui.llm.redaction import redact
from cacao_tui.llm.retry import is_retryable_status, parse_retry_after
from cacao_tui.llm.streamed_reply import MAX_NAME_CHARS, MAX_TOOL_CALLS, close_stream, dropped_call
from cacao_tui.llm.tool_arguments import parse_tool_arguments
from cacao_tui.llm.transport import transport_error, transport_error_types
from cacao_tui.llm.types import ChatResponse, Message, StopReason, ToolCall, ToolSpec, Usage
from cacao_tui.llm.wire_bounds import ResponseTooLarge, http_client_for

if TYPE_CHECKING:
    from cacao_tui.llm.selection import ProviderChoice

KEYLESS_PLACEHOLDER = "not-needed"

_FINISH_REASONS: dict[str, StopReason] = {
    "stop": "end",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
}


# Parameters a compatible server may refuse, and the name the tracked wrapper drops them by.
_OPTIONAL = {"response_format": "structured", "json_schema": "structured", "reasoning_effort": "reasoning",
             "prompt_cache_key": "cache", "stream_options": "stream_options"}  # fmt: skip


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
        self._official = is_official_endpoint(base_url)
        self._token_param = "max_completion_tokens" if self._official else "max_tokens"
        self._usage_in_stream = True
        timeout = openai.Timeout(timeout_s, connect=min(connect_timeout_s, timeout_s))
        self._client = openai.AsyncOpenAI(
            api_key=api_key or KEYLESS_PLACEHOLDER,
            base_url=base_url,
            max_retries=0,
            timeout=timeout,
            http_client=http_client_for(openai.DefaultAsyncHttpxClient, timeout=timeout),  # llm/wire_bounds.py
        )

    def _kwargs(self, request: ChatRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai_messages(request.messages, request.system),
            self._token_param: request.max_tokens,
            "stream": True,
        }
        if self._usage_in_stream:
            kwargs["stream_options"] = {"include_usage": True}
        if request.tools:
            kwargs["tools"] = [to_openai_tool(t) for t in request.tools]
        reasoning = request.reasoning is not None and request.info.reasoning != "none"
        if request.temperature is not None and not reasoning:  # refused alongside a reasoning effort
            kwargs["temperature"] = request.temperature
        if request.schema is not None and request.info.structured == "native":
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": _schema_name(request.schema_name), "schema": request.schema, "strict": True},
            }
        if reasoning:
            kwargs["reasoning_effort"] = request.reasoning
        if request.cache_key and self._official:
            kwargs["prompt_cache_key"] = request.cache_key
        return kwargs

    async def complete(self, request: ChatRequest) -> ChatResponse:
        sdk = self._sdk
        kwargs = self._kwargs(request)
        try:
            stream = await self._client.chat.completions.create(**kwargs)
            return await read_stream(stream, self.model, request)
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
            error = self._status_error(exc, kwargs)
            if error.param == "stream_options":  # an older server: no usage in streams, then
                self._usage_in_stream = False
                error = ProviderError(str(error), status=error.status, retryable=True, retry_after_s=0.0)
            raise error from None

    def _status_error(self, exc: Any, sent: dict[str, Any] | None = None) -> ProviderError:
        status = exc.status_code
        body = getattr(exc, "body", None)
        detail = body.get("message") if isinstance(body, dict) else None
        # Redacted before it is cut short, so a key echoed by the server cannot survive in part.
        full = " ".join(redact(str(detail or exc.message)).split())
        text = f"HTTP {status}: {full[:300]}"
        if status in (401, 403):
            text += f" (check {self._key_var})"
        code = str((body or {}).get("code") or "") if isinstance(body, dict) else ""
        if is_context_length_error(status, f"{code} {full}"):
            return ProviderError(text, status=status, kind="context_length", context_window=context_window_in(full))
        if status in (400, 422) and sent:
            for name, param in _OPTIONAL.items():
                if name in full and (name in sent or (param == "structured" and "response_format" in sent)):
                    return ProviderError(text, status=status, kind="unsupported", param=param)
        return ProviderError(
            text,
            status=status,
            retryable=is_retryable_status(status),
            retry_after_s=parse_retry_after(exc.response.headers),
        )

    async def aclose(self) -> None:
        await self._client.close()


def _schema_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in name)[:64] or "answer"


def to_openai_tool(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    }


def to_openai_messages(messages: list[Message], system: str | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for m in messages:
        if m.role == "user" and out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], str):
            # Consecutive user turns (a stable prefix, then the task) go as one message: some
            # servers' chat templates insist that roles alternate.
            out[-1]["content"] += "\n\n" + m.content
        elif m.role in ("system", "user"):
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


async def read_stream(stream: Any, model: str, request: ChatRequest) -> ChatResponse:
    """A streamed completion, read chunk by chunk into one ChatResponse (pieces reported
    through ``request.delta`` as they arrive), kept within the reply caps as it arrives: past
    them reading stops and the stream is closed (llm/streamed_reply.py)."""
    gather = request.gatherer()
    text: list[str] = []
    reasoning: list[str] = []
    refusal: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish: str | None = None
    usage: Any = None
    served_model: str | None = None
    try:
        with gather.reading():  # past the caps the wire stops: ResponseTooLarge below
            async for chunk in stream:
                served_model = getattr(chunk, "model", None) or served_model
                if getattr(chunk, "usage", None) is not None:
                    usage = chunk.usage
                for choice in getattr(chunk, "choices", None) or []:
                    if getattr(choice, "index", 0) not in (0, None):
                        continue
                    delta = choice.delta
                    if choice.finish_reason:
                        finish = choice.finish_reason
                    think = getattr(delta, "reasoning_content", None) or getattr(delta, "reasoning", None)
                    if isinstance(think, str) and think:
                        reasoning.append(gather.reasoning(think))
                        request.delta(reasoning=think)
                    piece = _text_of(getattr(delta, "content", None))
                    if piece:
                        text.append(gather.text(piece))
                        request.delta(text=piece)
                    if getattr(delta, "refusal", None):
                        refusal.append(gather.text(str(delta.refusal)))
                    for tc in getattr(delta, "tool_calls", None) or []:
                        _add_call_piece(calls, tc, gather, request)
    except ResponseTooLarge as exc:
        if not (text or calls or reasoning or refusal):
            raise ProviderError(str(exc), kind="response") from None
        gather.stop(str(exc))
    finally:
        if gather.full:
            await close_stream(stream)
    if finish is None and not text and not calls and not reasoning and not refusal:
        raise ProviderError("the stream ended without a reply", kind="response", retryable=True)
    tool_calls = []
    for n, (index, slot) in enumerate(sorted(calls.items())):
        if slot["custom"] and not slot["name"]:
            continue
        call_id = slot["id"] or f"call_{n}"
        dropped = gather.dropped(index)
        if dropped is not None:
            tool_calls.append(dropped_call(call_id, slot["name"], dropped))
            continue
        arguments, error = parse_tool_arguments(slot["arguments"] or "{}")
        tool_calls.append(ToolCall(id=call_id, name=slot["name"], arguments=arguments, error=error))
    raw_reason = finish or ""
    stop = _FINISH_REASONS.get(raw_reason, "other")
    if tool_calls and stop == "end":
        stop = "tool_use"
    body = "".join(text)
    if refusal and not body and not tool_calls:
        body, stop, raw_reason = "".join(refusal), "other", "refusal"
    response = ChatResponse(
        text=body,
        tool_calls=tool_calls,
        stop_reason=stop,
        raw_stop_reason=raw_reason or None,
        usage=_usage(usage),
        model=served_model or model,
        reasoning="".join(reasoning),
    )
    return gather.finish(response)


def _add_call_piece(calls: dict[int, dict[str, Any]], tc: Any, gather: Any, request: ChatRequest) -> None:
    """One streamed piece of a tool call (its id, name or arguments), kept while it fits the caps."""
    index = tc.index if isinstance(tc.index, int) and 0 <= tc.index < MAX_TOOL_CALLS else MAX_TOOL_CALLS
    slot = calls.setdefault(index, {"id": None, "name": "", "arguments": "", "custom": False})
    if tc.id:
        slot["id"] = str(tc.id)[:MAX_NAME_CHARS]
    fn = getattr(tc, "function", None)
    if fn is None:
        slot["custom"] = slot["custom"] or getattr(tc, "type", "function") not in (None, "function")
        return
    if fn.name and gather.arguments(index, fn.name):
        slot["name"] = (slot["name"] + fn.name)[:MAX_NAME_CHARS]
    if fn.arguments:
        if gather.arguments(index, fn.arguments):
            slot["arguments"] += fn.arguments
        else:
            slot["arguments"] = ""
        request.delta(tool_chars=len(fn.arguments))


def _usage(usage: Any) -> Usage:
    details = getattr(usage, "prompt_tokens_details", None)
    out_details = getattr(usage, "completion_tokens_details", None)
    return Usage(
        input_tokens=getattr(usage, "prompt_tokens", 0) or 0,
        output_tokens=getattr(usage, "completion_tokens", 0) or 0,
        cached_tokens=getattr(details, "cached_tokens", 0) or 0,
        reasoning_tokens=getattr(out_details, "reasoning_tokens", 0) or 0,
    )


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
    think = getattr(message, "reasoning_content", None) or getattr(message, "reasoning", None)
    return ChatResponse(
        text=text,
        tool_calls=calls,
        stop_reason=stop,
        raw_stop_reason=raw_reason or None,
        usage=_usage(getattr(completion, "usage", None)),
        model=getattr(completion, "model", None) or model,
        reasoning=think if isinstance(think, str) else "",
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
