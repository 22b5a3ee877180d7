"""Gemini generateContent with function calling, through the official ``google-genai`` SDK.

The SDK is imported when the provider is built. Its retries are off (one attempt);
automatic function calling is off (the engine runs the tools). The endpoint comes from
``GOOGLE_GEMINI_BASE_URL``, which google-genai reads itself; we pass it explicitly as
``http_options.base_url`` when the selection found it, so a .env value counts too.
The model's content is kept verbatim in ``provider_data`` and sent back on the next
turn, because Gemini 3 models reject function-call history without its thought
signatures.

Replies stream (``streamGenerateContent``); the streamed parts are put back together
(consecutive text parts joined, thought signatures kept on their part). Reasoning is
``thinking_config``: a ``thinking_level`` for Gemini 3, a ``thinking_budget`` for 2.5,
with the thought summaries asked for (``include_thoughts``) and kept as the reply's
reasoning. Structured calls send ``response_json_schema``. Implicit caching needs
nothing: the stable prefix comes first in every request.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from cacao_tui.llm.context_fit import context_window_in, is_context_length_error
from cacao_tui.llm.errors import ProviderError
from cacao_tui.llm.models import THINKING_BUDGET
from cacao_tui.llm.provider import AdapterSetup, ChatRequest
from cacao_tui.llm.redaction import redact
from cacao_tui.llm.retry import is_retryable_status, parse_retry_after
from cacao_tui.llm.streamed_reply import ReplyGatherer, close_stream
from cacao_tui.llm.tool_arguments import parse_tool_arguments
from cacao_tui.llm.transport import transport_error, transport_error_types
from cacao_tui.llm.types import ChatResponse, Message, StopReason, ToolCall, ToolSpec, Usage
from cacao_tui.llm.wire_bounds import ResponseTooLarge, http_client_for
from ktt.capped_read import check_json_value

if TYPE_CHECKING:
    from cacao_tui.llm.selection import ProviderChoice

CONTENT_KEY = "gemini_content"
SYNTHETIC_ID_PREFIX = "gemini-call-"  # ids we invent when the API sends none; never sent back
EMPTY_TURN = "(no reply)"

_FINISH_REASONS: dict[str, StopReason] = {"STOP": "end", "MAX_TOKENS": "max_tokens"}
_DURATION = re.compile(r"^\s*([0-9.]+)s\s*$")
_OPTIONAL = {"thinking": "reasoning", "thought": "reasoning", "response_json_schema": "structured",
             "responseJsonSchema": "structured", "response_schema": "structured"}  # fmt: skip


def create(choice: ProviderChoice, setup: AdapterSetup) -> GeminiProvider:
    return GeminiProvider(
        choice.model, api_key=setup.require_key(choice) or "", base_url=choice.base_url, timeout_s=setup.timeout_s
    )


class GeminiProvider:
    name = "gemini"

    def __init__(self, model: str, *, api_key: str, base_url: str | None = None, timeout_s: float = 300.0) -> None:
        from google import genai
        from google.genai import errors, types

        self._types = types
        self._errors = errors
        self.model = model
        http_options = types.HttpOptions(
            timeout=max(1, int(timeout_s * 1000)),  # milliseconds
            retry_options=types.HttpRetryOptions(attempts=1),
        )
        if base_url:
            http_options.base_url = base_url
        http_options.httpx_async_client = http_client_for(follow_redirects=True)  # llm/wire_bounds.py
        self._client = genai.Client(api_key=api_key, vertexai=False, http_options=http_options)
        self._transport_errors = transport_error_types()

    def _config(self, request: ChatRequest) -> tuple[list[Any], dict[str, Any]]:
        types = self._types
        system, contents = to_gemini_contents(request.messages, request.system, types)
        config: dict[str, Any] = {
            "max_output_tokens": request.max_tokens,
            "automatic_function_calling": types.AutomaticFunctionCallingConfig(disable=True),
        }
        if system:
            config["system_instruction"] = system
        if request.temperature is not None:
            config["temperature"] = request.temperature
        if request.tools:
            config["tools"] = [types.Tool(function_declarations=[to_gemini_function(t, types) for t in request.tools])]
        elif request.json_output:
            config["response_mime_type"] = "application/json"
            if request.schema is not None and request.info.structured == "native":
                config["response_json_schema"] = request.schema
        thinking = self._thinking(request)
        if thinking is not None:
            config["thinking_config"] = thinking
        return contents, config

    def _thinking(self, request: ChatRequest) -> Any:
        types = self._types
        control = request.info.reasoning
        if control == "none":
            return None
        effort = request.reasoning
        if effort is None:  # the model's default effort; its thought summaries still come back
            return types.ThinkingConfig(include_thoughts=True) if request.info.reasons else None
        if control == "level":
            level = {
                "low": types.ThinkingLevel.LOW,
                "medium": types.ThinkingLevel.MEDIUM,
                "high": types.ThinkingLevel.HIGH,
            }
            return types.ThinkingConfig(include_thoughts=True, thinking_level=level[effort])
        budget = min(THINKING_BUDGET[effort], max(128, request.max_tokens // 2))
        return types.ThinkingConfig(include_thoughts=True, thinking_budget=budget)

    async def complete(self, request: ChatRequest) -> ChatResponse:
        types = self._types
        contents, config = self._config(request)
        try:
            stream = await self._client.aio.models.generate_content_stream(
                model=self.model, contents=contents, config=types.GenerateContentConfig(**config)
            )
            response, gather = await read_stream(stream, request, types)
        except self._errors.APIError as exc:
            raise _status_error(exc, config) from None
        except self._transport_errors as exc:
            raise transport_error(exc) from None
        except ResponseTooLarge as exc:  # an error body past the bound
            raise ProviderError(str(exc), kind="response") from None
        except RecursionError:  # the SDK parsing an event nested past Python's limit
            raise ProviderError("the server sent JSON nested too deeply to read", kind="response") from None
        return gather.finish(from_gemini_response(response, self.model, gather))

    async def count_tokens(self, request: ChatRequest) -> int | None:
        """The provider's count of the prompt (contents; the system prompt and the tools are
        not accepted by the Gemini API's counter, so they are estimated by the caller's ratio)."""
        contents, _ = self._config(request)
        counted = await self._client.aio.models.count_tokens(model=self.model, contents=contents)
        total = int(getattr(counted, "total_tokens", 0) or 0)
        if not total:
            return None
        extra = len(request.system or "") + sum(len(t.description) + len(str(t.parameters)) for t in request.tools)
        return total + extra // 4

    async def aclose(self) -> None:
        close = getattr(self._client.aio, "aclose", None)
        if close is not None:
            await close()


def _retry_delay_from_body(details: Any) -> float | None:
    """Gemini puts the wait in the error body (google.rpc.RetryInfo), not in a header."""
    error = details.get("error", details) if isinstance(details, dict) else None
    for item in (error or {}).get("details", []) if isinstance(error, dict) else []:
        if isinstance(item, dict) and str(item.get("@type", "")).endswith("RetryInfo"):
            match = _DURATION.match(str(item.get("retryDelay", "")))
            if match:
                return float(match.group(1))
    return None


async def read_stream(stream: Any, request: ChatRequest, types: Any) -> tuple[Any, ReplyGatherer]:
    """The streamed chunks put back together as one response: parts in order, consecutive
    text parts of the same kind joined (a thought signature stays with its part); kept within
    the reply caps as they arrive (llm/streamed_reply.py: past them reading stops)."""
    gather = request.gatherer()
    parts: list[Any] = []
    last: Any = None
    candidate_fields: dict[str, Any] = {}
    try:
        with gather.reading():  # past the caps the wire stops: ResponseTooLarge below
            async for chunk in stream:
                last = chunk
                for candidate in (getattr(chunk, "candidates", None) or [])[:1]:
                    if getattr(candidate, "finish_reason", None) is not None:
                        candidate_fields["finish_reason"] = candidate.finish_reason
                    if getattr(candidate, "finish_message", None):
                        candidate_fields["finish_message"] = str(candidate.finish_message)[:2000]
                    content = getattr(candidate, "content", None)
                    for part in getattr(content, "parts", None) or []:
                        _merge_part(parts, part, request, gather)
    except ResponseTooLarge as exc:
        if not parts:
            raise ProviderError(str(exc), kind="response") from None
        gather.stop(str(exc))
    finally:
        if gather.full:
            await close_stream(stream)
    if last is None:
        raise ProviderError("the stream ended without a reply", kind="response", retryable=True)
    if not parts and not candidate_fields:
        return last, gather  # no candidates at all: a blocked prompt, answered in one chunk
    candidate = types.Candidate(content=types.Content(role="model", parts=parts), index=0, **candidate_fields)
    merged = types.GenerateContentResponse(
        candidates=[candidate],
        usage_metadata=getattr(last, "usage_metadata", None),
        model_version=getattr(last, "model_version", None),
        prompt_feedback=getattr(last, "prompt_feedback", None),
    )
    return merged, gather


def _merge_part(parts: list[Any], part: Any, request: ChatRequest, gather: ReplyGatherer) -> None:
    text = getattr(part, "text", None)
    thought = bool(getattr(part, "thought", False))
    signature = getattr(part, "thought_signature", None)
    if signature:
        gather.signed(len(signature))
    if text is not None and getattr(part, "function_call", None) is None:
        if thought:
            request.delta(reasoning=text)
        else:
            request.delta(text=text)
        kept = gather.reasoning(text) if thought else gather.text(text)
        if not kept and not signature:
            return  # past the cap: nothing of it is kept
        if kept != text:
            part = part.model_copy(update={"text": kept})
            text = kept
        prev = parts[-1] if parts else None
        if (
            prev is not None
            and getattr(prev, "text", None) is not None
            and getattr(prev, "function_call", None) is None
            and bool(getattr(prev, "thought", False)) == thought
            and not getattr(prev, "thought_signature", None)
        ):
            merged = prev.model_copy(update={"text": prev.text + text})
            if signature:
                merged.thought_signature = signature
            parts[-1] = merged
            return
    elif getattr(part, "function_call", None) is not None:
        call = ("call", sum(1 for p in parts if getattr(p, "function_call", None) is not None))
        args = part.function_call.args or {}
        try:
            chars = len(json.dumps(check_json_value(args), ensure_ascii=False))
        except (ValueError, TypeError):
            chars = 0  # out of bounds: parse_tool_arguments says so to the model
        if not gather.argument_chars(call, chars):  # over the cap: kept without its arguments, never run
            part = part.model_copy(update={"function_call": part.function_call.model_copy(update={"args": {}})})
        request.delta(tool_chars=chars)
    parts.append(part)


def _status_error(exc: Any, sent: dict[str, Any] | None = None) -> ProviderError:
    status = int(getattr(exc, "code", 0) or 0)
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    retry_after = parse_retry_after(dict(headers) if headers is not None else None)
    if retry_after is None:
        retry_after = _retry_delay_from_body(getattr(exc, "details", None))
    message = getattr(exc, "message", None) or str(exc)
    status_name = getattr(exc, "status", None)
    # Redacted before it is cut short, so a key echoed by the server cannot survive in part.
    detail = " ".join(redact(str(message)).split())[:300]
    text = f"HTTP {status}" + (f" {status_name}" if status_name else "") + f": {detail}"
    if status in (401, 403) or (status == 400 and "API key" in str(message)):
        text += " (check GEMINI_API_KEY / GOOGLE_API_KEY)"
    full = " ".join(str(message).split())
    if is_context_length_error(status, full):
        return ProviderError(text, status=status, kind="context_length", context_window=context_window_in(full))
    if status == 400 and sent:
        for name, param in _OPTIONAL.items():
            if name in full and (param != "reasoning" or "thinking_config" in sent):
                return ProviderError(text, status=status, kind="unsupported", param=param)
    return ProviderError(text, status=status, retryable=is_retryable_status(status), retry_after_s=retry_after)


def to_gemini_function(tool: ToolSpec, types: Any) -> Any:
    return types.FunctionDeclaration(
        name=tool.name, description=tool.description, parameters_json_schema=tool.parameters
    )


def to_gemini_contents(messages: list[Message], system: str | None, types: Any) -> tuple[str | None, list[Any]]:
    """System instruction and contents; tool results become function responses in user
    turns (a failed one is sent under ``error``), consecutive same-role turns are merged."""
    systems = [system] if system else []
    names: dict[str, str] = {}
    contents: list[Any] = []

    def add(role: str, parts: list[Any]) -> None:
        if contents and contents[-1].role == role:
            contents[-1].parts.extend(parts)
        else:
            contents.append(types.Content(role=role, parts=list(parts)))

    for m in messages:
        if m.role == "system":
            if m.content:
                systems.append(m.content)
        elif m.role == "user":
            add("user", [types.Part(text=m.content or EMPTY_TURN)])
        elif m.role == "assistant":
            for call in m.tool_calls:
                names[call.id] = call.name
            add("model", _model_parts(m, types))
        else:
            name = names.get(m.tool_call_id or "", "")
            content = m.content or "(no output)"
            if not name:  # the answer to a malformed call that has no function_call part
                add("user", [types.Part(text=f"Error in your previous function call: {content}")])
                continue
            call_id = None if (m.tool_call_id or "").startswith(SYNTHETIC_ID_PREFIX) else m.tool_call_id
            payload = {"error": content} if m.is_error else {"output": content}
            response = types.FunctionResponse(id=call_id, name=name, response=payload)
            add("user", [types.Part(function_response=response)])
    return ("\n\n".join(systems) or None), contents


def _model_parts(m: Message, types: Any) -> list[Any]:
    raw = (m.provider_data or {}).get(CONTENT_KEY)
    parts: list[Any] = []
    if isinstance(raw, dict):
        content = types.Content.model_validate(raw)
        parts = list(content.parts or [])
    else:
        if m.content:
            parts.append(types.Part(text=m.content))
        for call in m.tool_calls:
            if call.name:
                call_id = None if call.id.startswith(SYNTHETIC_ID_PREFIX) else call.id
                parts.append(
                    types.Part(function_call=types.FunctionCall(id=call_id, name=call.name, args=call.arguments))
                )
    if any(not c.name for c in m.tool_calls):
        parts.append(types.Part(text="(I attempted a function call that was malformed.)"))
    return parts or [types.Part(text=EMPTY_TURN)]


def from_gemini_response(response: Any, model: str, gather: ReplyGatherer | None = None) -> ChatResponse:
    candidates = getattr(response, "candidates", None) or []
    meta = getattr(response, "usage_metadata", None)
    usage = Usage(
        input_tokens=getattr(meta, "prompt_token_count", 0) or 0,
        output_tokens=(getattr(meta, "candidates_token_count", 0) or 0)
        + (getattr(meta, "thoughts_token_count", 0) or 0),
        cached_tokens=getattr(meta, "cached_content_token_count", 0) or 0,
        reasoning_tokens=getattr(meta, "thoughts_token_count", 0) or 0,
    )
    model_name = getattr(response, "model_version", None) or model
    if not candidates:
        feedback = getattr(response, "prompt_feedback", None)
        reason = getattr(feedback, "block_reason", None)
        raw = f"PROMPT_BLOCKED:{_enum_name(reason)}" if reason else "NO_CANDIDATES"
        return ChatResponse(stop_reason="other", raw_stop_reason=raw, usage=usage, model=model_name)
    candidate = candidates[0]
    content = getattr(candidate, "content", None)
    parts = list(getattr(content, "parts", None) or [])
    text = "".join(p.text for p in parts if getattr(p, "text", None) and not getattr(p, "thought", False))
    thoughts = "".join(p.text for p in parts if getattr(p, "text", None) and getattr(p, "thought", False))
    calls: list[ToolCall] = []
    for p in parts:
        fc = getattr(p, "function_call", None)
        if fc is None:
            continue
        dropped = gather.dropped(("call", len(calls))) if gather is not None else None
        arguments, error = ({}, dropped) if dropped else parse_tool_arguments(fc.args)
        call_id = fc.id or f"{SYNTHETIC_ID_PREFIX}{len(calls)}"
        calls.append(ToolCall(id=call_id, name=fc.name or "", arguments=arguments, error=error))
    raw_reason = _enum_name(getattr(candidate, "finish_reason", None))
    stop = _FINISH_REASONS.get(raw_reason, "other")
    if raw_reason == "MALFORMED_FUNCTION_CALL":
        message = getattr(candidate, "finish_message", None) or "the function call could not be parsed"
        calls.append(
            ToolCall(
                id=f"{SYNTHETIC_ID_PREFIX}malformed-{len(calls)}",
                name="",
                error=(
                    f"your function call was malformed and was not run: {message}. "
                    "Call the tool again with valid JSON arguments."
                ),
            )
        )
        stop = "tool_use"
    elif calls and stop == "end":
        stop = "tool_use"
    provider_data = None
    if content is not None and parts:
        provider_data = {CONTENT_KEY: content.model_dump(mode="json", exclude_none=True)}
    return ChatResponse(
        text=text,
        tool_calls=calls,
        stop_reason=stop,
        raw_stop_reason=raw_reason or None,
        usage=usage,
        model=model_name,
        provider_data=provider_data,
        reasoning=thoughts,
    )


def _enum_name(value: Any) -> str:
    if value is None:
        return ""
    return str(getattr(value, "value", None) or getattr(value, "name", None) or value)
