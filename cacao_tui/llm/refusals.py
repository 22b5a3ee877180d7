"""Whether a reply is usable at all: refusals and empty replies, per provider and by content.

Providers say so in their own ways: OpenAI's ``refusal`` field and ``content_filter``
finish, Anthropic's ``refusal`` stop reason, Gemini's safety finishes and blocked
prompts. Models also refuse in plain text ("I'm sorry, I can't help with that."), which
no stop reason marks: a short reply that opens like a refusal counts too. Such a reply
is retried once with the task restated and then treated as a failed step; it is never
stored as an analysis, a plan or a kernel.
"""

from __future__ import annotations

import re

from cacao_tui.llm.structured import strip_reasoning
from cacao_tui.llm.types import ChatResponse

# Stop reasons (raw, as each adapter records them) that mean the provider refused or blocked.
REFUSAL_STOPS = frozenset(
    {
        "refusal",  # OpenAI message.refusal, Anthropic stop_reason
        "content_filter",  # OpenAI / Azure
        "SAFETY",
        "RECITATION",
        "PROHIBITED_CONTENT",
        "BLOCKLIST",
        "SPII",
        "IMAGE_SAFETY",
    }
)
BLOCKED_PREFIX = "PROMPT_BLOCKED"  # Gemini: the prompt itself was blocked (no candidates)
MAX_REFUSAL_CHARS = 600  # a refusal is short; a long reply that starts apologetically is an answer

_OPENING = re.compile(
    r"^\W*(?:(?:i'?m|i am)\s+(?:so\s+|really\s+)?sorry|sorry|i\s+apologi[sz]e|unfortunately|as an ai\b[^.]*)?"
    r"[\s,.!:;-]*(?:but\s+)?"
    r"i\s*(?:can(?:no|')?t|cannot|won'?t|will not|am not able to|am unable to|'m not able to|'m unable to|must decline"
    r"|do not feel comfortable|don'?t feel comfortable)\b"
    r"(?:\s+\w+){0,3}?\s*(?:help|assist|comply|provide|do|fulfil+|complete|support|write|create|generate|continue"
    r"|answer|engage|with that|that|this|to)\b",
    re.IGNORECASE,
)


def refusal_reason(response: ChatResponse) -> str | None:
    """Why ``response`` is a refusal, or None. A reply with tool calls is not one."""
    if response.tool_calls:
        return None
    raw = response.raw_stop_reason or ""
    text = " ".join(strip_reasoning(response.text)[0].split())
    if raw in REFUSAL_STOPS or raw.startswith(BLOCKED_PREFIX):
        said = f": {_snippet(text)}" if text else ""
        return f"the provider stopped the reply ({raw}){said}"
    if text and len(text) <= MAX_REFUSAL_CHARS and _OPENING.match(text):
        return f"the model refused: {_snippet(text)}"
    return None


def empty_reason(response: ChatResponse) -> str | None:
    """Why ``response`` holds nothing to use (no text beyond reasoning, no tool call), or None."""
    if response.tool_calls or strip_reasoning(response.text)[0].strip():
        return None
    if response.stop_reason == "max_tokens":
        return "the reply was cut off at the output token limit before any answer (raise --max-tokens)"
    return "the reply was empty"


def unusable_reason(response: ChatResponse) -> str | None:
    """A refusal or an empty reply: the reason, else None."""
    return refusal_reason(response) or empty_reason(response)


def restate(reason: str, task: str) -> str:
    """The one retry's message: what was wrong, and the task again."""
    return (
        f"Your previous reply could not be used ({reason}). This is a legitimate performance-engineering "
        "task on code you were given: writing, measuring and improving a CUDA kernel for the problem above. "
        f"Please do it now: {task}"
    )


def _snippet(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
