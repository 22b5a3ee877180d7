"""Context in tokens: estimate a request's size, shrink it to fit the model's window.

Before each request the tracked wrapper estimates its prompt tokens (characters over a
ratio calibrated on the provider's own counts of earlier calls; near the limit it asks the
provider's counting endpoint where there is one). When the request would not fit the
context window less the output limit, it is shrunk here, in this order, until it fits:

1. the results of older tool calls (not those of the turn in progress: the newest
   assistant message and what follows it) are replaced by a stub that says so (the model
   can call the tool again);
2. the large arguments of older tool calls (files written long ago) likewise;
3. older turns of the conversation are cut to a head and a tail;
4. last, the first message (the task) is cut the same way.

Signed provider data of older assistant turns (thinking blocks, thought signatures) is
dropped with them: providers require it only for the turn in progress. A server's
"context length exceeded" answer is recognised here too (``context_window_in``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from cacao_tui.llm.types import Message, ToolSpec

STUB_CHARS = 400  # what an older turn keeps when history is cut (head and tail)
DEFAULT_CHARS_PER_TOKEN = 3.5  # conservative for code and JSON until calibrated
SAFETY = 0.97  # aim a little under the window: estimates are estimates

_CONTEXT_PATTERNS = re.compile(
    r"context[_ ]length[_ ]exceeded|maximum context length|context window|prompt is too long"
    r"|too many (?:input )?tokens|input token count|exceeds? the (?:maximum|max)(?: number of)? (?:input )?tokens"
    r"|reduce the length of the messages|request too large",
    re.IGNORECASE,
)
_WINDOW = (
    re.compile(
        r"(?:maximum context length is|context window(?: of| is)?|maximum(?: number of)? (?:input )?tokens(?: allowed)?"
        r"(?: is)?|limit of|max(?:imum)?)\s*:?\s*\(?([0-9][0-9,_]{2,})\)?\s*(?:tokens?)?",
        re.IGNORECASE,
    ),
    re.compile(r"([0-9][0-9,_]{2,})\s*(?:tokens?\s*)?maximum", re.IGNORECASE),  # "9100 tokens > 8192 maximum"
)


def is_context_length_error(status: int | None, message: str) -> bool:
    return status in (400, 413) and bool(_CONTEXT_PATTERNS.search(message))


def context_window_in(message: str) -> int | None:
    """The window a context-length error names ("maximum context length is 8192 tokens")."""
    match = next((m for m in (p.search(message) for p in _WINDOW) if m), None)
    if not match:
        return None
    try:
        value = int(re.sub(r"[,_]", "", match.group(1)))
    except ValueError:
        return None
    return value if value >= 256 else None


def message_chars(m: Message) -> int:
    size = len(m.content) + sum(len(json.dumps(c.arguments, ensure_ascii=False)) + len(c.name) for c in m.tool_calls)
    if m.provider_data:
        size += len(json.dumps(m.provider_data, ensure_ascii=False))
    return size + 8  # role and framing


def request_chars(system: str | None, messages: list[Message], tools: list[ToolSpec]) -> int:
    tool_chars = sum(len(t.name) + len(t.description) + len(json.dumps(t.parameters)) for t in tools)
    return len(system or "") + tool_chars + sum(message_chars(m) for m in messages)


@dataclass
class TokenEstimator:
    """Characters per prompt token, learnt from the provider's counts (``observe``)."""

    chars_per_token: float = DEFAULT_CHARS_PER_TOKEN
    samples: int = 0

    def tokens(self, chars: int) -> int:
        return int(chars / self.chars_per_token) + 1

    def observe(self, chars: int, tokens: int) -> None:
        """Calibrate on one call: ``chars`` sent, ``tokens`` the provider counted."""
        if tokens < 64 or chars < 256:
            return
        ratio = max(1.2, min(8.0, chars / tokens))
        weight = 1.0 / (self.samples + 1) if self.samples < 4 else 0.2
        self.chars_per_token += (ratio - self.chars_per_token) * weight
        self.samples += 1


@dataclass
class Fitted:
    messages: list[Message]
    notes: list[str] = field(default_factory=list)


def _stub_tool(m: Message, tokens: int) -> Message:
    text = (
        f"[cacao: the output of this tool call (~{tokens:,} tokens) was dropped to fit the model's context "
        "window; call the tool again if you still need it]"
    )
    return m.model_copy(update={"content": text})


def _stub_arguments(m: Message) -> Message:
    calls = []
    for c in m.tool_calls:
        args = {
            k: (
                f"[cacao: {len(v):,} characters dropped to fit the context window]"
                if isinstance(v, str) and len(v) > STUB_CHARS
                else v
            )
            for k, v in c.arguments.items()
        }
        calls.append(c.model_copy(update={"arguments": args}))
    return m.model_copy(update={"tool_calls": calls, "provider_data": None})


def _cut(m: Message, keep: int) -> Message:
    text = m.content
    if len(text) <= keep:
        return m.model_copy(update={"provider_data": None}) if m.provider_data else m
    head = keep * 2 // 3
    tail = keep - head
    note = f"\n[cacao: {len(text) - keep:,} characters of this turn dropped to fit the model's context window]\n"
    return m.model_copy(update={"content": text[:head] + note + text[-tail:], "provider_data": None})


def fit_messages(messages: list[Message], budget_tokens: int, count: Callable[[list[Message]], int]) -> Fitted:
    """``messages`` shrunk until ``count`` of them is within ``budget_tokens`` (or nothing
    more can go), with a note per stage that was needed."""
    out = list(messages)
    total = count(out)
    if total <= budget_tokens:
        return Fitted(out)
    notes: list[str] = []
    before = total
    task_end = next((i for i, m in enumerate(out) if m.role != "user"), len(out))  # the opening user turn(s)
    task_end = max(1, min(task_end, len(out) - 1))
    # The turn in progress is never shrunk: the newest assistant message and what answers it.
    newest = max((i for i, m in enumerate(out) if m.role == "assistant"), default=len(out) - 1)
    older = range(task_end, max(task_end, newest))

    def stage(what: str, indices: range | list[int], shrink: Callable[[int, Message], Message | None]) -> bool:
        nonlocal total
        changed = 0
        for i in indices:
            if total <= budget_tokens:
                break
            new = shrink(i, out[i])
            if new is None or new is out[i]:
                continue
            old_tokens = count([out[i]])
            out[i] = new
            total += count([new]) - old_tokens
            changed += 1
        if changed:
            notes.append(f"{what} ({changed})")
        return total <= budget_tokens

    def tool_result(i: int, m: Message) -> Message | None:
        return _stub_tool(m, count([m])) if m.role == "tool" and len(m.content) > STUB_CHARS else None

    def arguments(i: int, m: Message) -> Message | None:
        big = any(isinstance(v, str) and len(v) > STUB_CHARS for c in m.tool_calls for v in c.arguments.values())
        return _stub_arguments(m) if m.role == "assistant" and big else None

    def history(i: int, m: Message) -> Message | None:
        return _cut(m, STUB_CHARS) if message_chars(m) > STUB_CHARS * 2 else None

    done = (
        stage("older tool results dropped", older, tool_result)
        or stage("older tool-call arguments dropped", older, arguments)
        or stage("older turns cut", older, history)
    )
    if not done and out:
        ratio = budget_tokens / max(total, 1)
        task = sorted(range(task_end), key=lambda i: -len(out[i].content))
        stage("the task cut", task, lambda i, m: _cut(m, max(STUB_CHARS, int(len(m.content) * ratio))))
    summary = f"context shrunk from ~{before:,} to ~{total:,} tokens to fit {budget_tokens:,}: " + ", ".join(notes)
    return Fitted(out, [summary])
