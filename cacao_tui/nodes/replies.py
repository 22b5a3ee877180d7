"""What the free-text steps do with a model's reply, and how their prompts open.

A step that wants prose (analyze, plan, propose) or a file (the single-shot implement
and configure) asks through ``ask_text``: a refusal or an empty reply is retried once
with the task restated, and a second one raises ``ReplyUnusable`` with the reason, so it
is never stored as an analysis, a plan or a kernel. Reasoning blocks (``<think>``) are
taken out of what is kept. Code is read from the last fenced block, or, without a fence,
from a reply that is plainly the file itself.

``opening_turn`` splits a prompt into its stable prefix (the problem brief, the
tuning-spec guide: the same in every call of a run) and the rest, so providers can cache
the prefix (see cacao_tui/llm/anthropic_adapter.py for the breakpoints).
"""

from __future__ import annotations

import re

from cacao_tui import prompts
from cacao_tui.llm import CallContext, ChatResponse, Message, TrackedLLM
from cacao_tui.llm.errors import ReplyUnusable
from cacao_tui.llm.refusals import restate, unusable_reason
from cacao_tui.llm.structured import strip_reasoning
from cacao_tui.nodes.briefing import analysis_section
from cacao_tui.nodes.context import RunDeps
from cacao_tui.nodes.problem_brief import problem_brief

_FENCE = re.compile(r"```([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.DOTALL)
_OPEN_FENCE = re.compile(r"```([A-Za-z0-9_+-]*)[ \t]*\n(.*)\Z", re.DOTALL)  # cut off before its close
CODE_START = re.compile(r"^(?:#include|#define|#pragma|extern\s+\"C\"|template\s*<|__global__|//|/\*)", re.MULTILINE)
YAML_START = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\s*:", re.MULTILINE)


def require_text(resp: ChatResponse, node: str) -> str:
    """The reply's text without reasoning blocks; ReplyUnusable when nothing is left."""
    text = strip_reasoning(resp.text or "")[0].strip()
    if not text:
        raise ReplyUnusable(f"{node}: the model returned no text", reason="the reply was empty", text=resp.text)
    if resp.stop_reason == "max_tokens":
        text += "\n[truncated at the token limit]"
    return text


async def ask_text(
    llm: TrackedLLM, messages: list[Message], *, ctx: CallContext, system: str | None, task: str
) -> ChatResponse:
    """One call of a free-text step. A refusal or an empty reply is asked once more with
    ``task`` restated; a second one raises ReplyUnusable naming the reason."""
    resp = await llm.chat(messages, ctx=ctx, system=system)
    problem = unusable_reason(resp)
    if problem is None:
        return resp
    retry = [*messages, resp.to_message(), Message(role="user", content=restate(problem, task))]
    resp = await llm.chat(retry, ctx=ctx, system=system, purpose="retry")
    again = unusable_reason(resp)
    if again is not None:
        raise ReplyUnusable(f"{ctx.node}: {again} (also after the task was restated)", reason=again, text=resp.text)
    return resp


def stable_prefix(deps: RunDeps, *, source: bool = True) -> str:
    """How the branch steps' prompts open (``$problem`` then ``$analysis``): the same text in
    every call of a step in a run (``source``: the brief with the reference's source)."""
    brief = problem_brief(deps, source=source)
    return prompts.tidy(f"{brief}\n\n{analysis_section(deps)}")  # as a rendered prompt has it


def opening_turn(text: str, stable: str) -> list[Message]:
    """The first user turn as [stable prefix, the rest] when ``text`` starts with ``stable``."""
    if stable and text.startswith(stable) and text[len(stable) :].strip():
        rest = text[len(stable) :].lstrip("\n")
        return [Message(role="user", content=stable, cache_prefix=True), Message(role="user", content=rest)]
    return [Message(role="user", content=text)]


def fenced_block(text: str, languages: tuple[str, ...]) -> str | None:
    """The last fenced block in one of ``languages`` (or an unlabelled one); a block cut off
    before its closing fence counts when there is no closed one."""
    body = strip_reasoning(text or "")[0]
    found = None
    for lang, block in _FENCE.findall(body):
        if lang.lower() in languages or lang == "":
            found = block
    if found is None:
        match = _OPEN_FENCE.search(body)
        if match and (match.group(1).lower() in languages or match.group(1) == ""):
            found = match.group(2)
    return found


def code_reply(
    text: str, languages: tuple[str, ...], marker: str, start_at: re.Pattern[str] = CODE_START
) -> str | None:
    """A file from a reply: its fenced block, else the reply itself when it holds
    ``marker`` and reads as the file from its first line matching ``start_at`` on (prose
    before it goes)."""
    block = fenced_block(text, languages)
    if block is not None:
        return block
    body = strip_reasoning(text or "")[0]
    if marker not in body:
        return None
    start = start_at.search(body)
    return body[start.start() :].strip() + "\n" if start else None
