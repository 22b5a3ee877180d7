"""Small checks on model replies shared by the free-text steps."""

from __future__ import annotations

import re

from cacao_tui.llm import ChatResponse, LLMError

_FENCE = re.compile(r"```([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.DOTALL)


def require_text(resp: ChatResponse, node: str) -> str:
    text = (resp.text or "").strip()
    if not text:
        raise LLMError(f"{node}: the model returned no text")
    if resp.stop_reason == "max_tokens":
        text += "\n[truncated at the token limit]"
    return text


def fenced_block(text: str, languages: tuple[str, ...]) -> str | None:
    """The last fenced block in one of ``languages`` (or an unlabelled one)."""
    found = None
    for lang, body in _FENCE.findall(text or ""):
        if lang.lower() in languages or lang == "":
            found = body
    return found
