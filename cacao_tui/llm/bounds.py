"""Size bounds on what a model sends and what is sent back to it.

A reply is capped when it arrives (``cap_reply``): text past the text cap is cut with a
note, and a tool call whose arguments do not fit the reply cap is not run (it carries an
error the engine returns to the model). Later requests carry older turns shortened
(``cap_context``): each string of a message other than the newest is cut to a
per-message cap, keeping its head and tail, and if the older turns together still exceed
a total cap the oldest (the first, the task, last) are cut further. So one oversized
reply costs one record, not one per later call. The caps are in ``settings.DEFAULTS``.

Signed provider data (Anthropic thinking blocks, Gemini thought signatures) is never
altered: only strings under other keys are shortened.
"""

from __future__ import annotations

import json
from typing import Any

from cacao_tui.llm.types import ChatResponse, Message, ToolCall

# Keys whose strings a provider verifies: left whole.
_SIGNED_KEYS = frozenset({"signature", "thought_signature", "thoughtSignature", "data", "thinking"})
MIN_KEPT_CHARS = 2048


def _cut(text: str, limit: int, what: str) -> str:
    """``text`` cut to about ``limit`` characters: head and tail kept, a note in between."""
    if len(text) <= limit:
        return text
    note = f"\n[... {len(text) - limit:,} characters of this {what} cut by cacao (limit {limit:,}) ...]\n"
    keep = max(0, limit - len(note))
    head = keep * 3 // 4
    tail = keep - head
    return text[:head] + note + (text[-tail:] if tail else "")


def _shorten(data: Any, limit: int, what: str) -> Any:
    """JSON-like ``data`` with every string longer than ``limit`` cut (signed keys aside)."""
    if isinstance(data, str):
        return _cut(data, limit, what)
    if isinstance(data, dict):
        return {k: (v if k in _SIGNED_KEYS else _shorten(v, limit, what)) for k, v in data.items()}
    if isinstance(data, list):
        return [_shorten(v, limit, what) for v in data]
    return data


def _args_chars(call: ToolCall) -> int:
    return len(json.dumps(call.arguments, ensure_ascii=False))


def reply_chars(response: ChatResponse) -> int:
    return len(response.text) + sum(_args_chars(c) for c in response.tool_calls)


def cap_reply(response: ChatResponse, *, text_cap: int, cap: int) -> tuple[ChatResponse, str | None]:
    """The reply within bounds: its text within ``text_cap`` characters, text and tool-call
    arguments together within ``cap``. Returns it with a note saying what was cut, or
    unchanged with None."""
    size = reply_chars(response)
    if len(response.reasoning) > text_cap:  # shown and recorded, never sent back: cut alone
        kept = response.reasoning[:text_cap] + f"\n[cacao: reasoning cut at {text_cap:,} characters]"
        response = response.model_copy(update={"reasoning": kept})
        if size <= cap and len(response.text) <= text_cap:
            return response, f"the reasoning text was cut to {text_cap:,} characters"
    if size <= cap and len(response.text) <= text_cap:
        return response, None
    note = f"the reply was {size:,} characters ({len(response.text):,} of text)"
    budget = cap
    text = response.text
    if len(text) > min(text_cap, budget):
        keep = min(text_cap, budget)
        note += f"; its text was cut to {keep:,} characters"
        text = text[:keep] + f"\n[cacao: reply cut here: {note}]"
    budget -= len(text)
    calls: list[ToolCall] = []
    dropped = 0
    for call in response.tool_calls:
        chars = _args_chars(call)
        if chars <= budget and call.error is None:
            budget -= chars
            calls.append(call)
            continue
        dropped += 1
        calls.append(
            call.model_copy(
                update={
                    "arguments": {},
                    "error": call.error
                    or (
                        f"the arguments were {chars:,} characters and did not fit the reply cap of {cap:,}; "
                        "the tool was not run. Write large files in parts (write_file, then edit_file)."
                    ),
                }
            )
        )
    provider_data = _shorten(response.provider_data, text_cap, "reply") if response.provider_data else None
    if dropped:
        note += f"; {dropped} tool call(s) over the cap of {cap:,} not run"
    capped = response.model_copy(update={"text": text, "tool_calls": calls, "provider_data": provider_data})
    return capped, note


def _message_chars(m: Message) -> int:
    size = len(m.content) + sum(_args_chars(c) for c in m.tool_calls)
    if m.provider_data:
        size += len(json.dumps(m.provider_data, ensure_ascii=False))
    return size


def _cap_message(m: Message, limit: int) -> Message:
    if _message_chars(m) <= limit:
        return m
    update: dict[str, Any] = {"content": _cut(m.content, limit, "earlier turn")}
    if m.tool_calls:
        update["tool_calls"] = [
            c.model_copy(update={"arguments": _shorten(c.arguments, limit, "earlier turn")}) for c in m.tool_calls
        ]
    if m.provider_data:
        update["provider_data"] = _shorten(m.provider_data, limit, "earlier turn")
    return m.model_copy(update=update)


def cap_context(messages: list[Message], *, message_cap: int, total_cap: int, newest_cap: int) -> list[Message]:
    """The conversation to send: the newest message within ``newest_cap``, every earlier
    one within ``message_cap``, and the earlier ones together within ``total_cap``
    (oldest cut first, the first, which states the task, last)."""
    if not messages:
        return []
    newest = _cap_message(messages[-1], newest_cap)
    older = [_cap_message(m, message_cap) for m in messages[:-1]]
    total = sum(_message_chars(m) for m in older)
    for i in [*range(1, len(older)), 0]:
        if total <= total_cap:
            break
        before = _message_chars(older[i])
        if before <= MIN_KEPT_CHARS:
            continue
        older[i] = _cap_message(older[i], max(MIN_KEPT_CHARS, before - (total - total_cap)))
        total += _message_chars(older[i]) - before
    return [*older, newest]
