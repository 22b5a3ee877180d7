"""Analyze: the master's first look at the reference (one LLM call, free text)."""

from __future__ import annotations

from cacao_tui import prompts
from cacao_tui.llm import CallContext, Message
from cacao_tui.nodes.briefing import problem_brief
from cacao_tui.nodes.context import RunDeps
from cacao_tui.nodes.replies import require_text


async def analyze(deps: RunDeps) -> str:
    text = prompts.render("analyze", problem=problem_brief(deps), gpu_notes=prompts.gpu_knowledge(deps.gpu.arch))
    resp = await deps.llm.chat(
        [Message(role="user", content=text)],
        ctx=CallContext(branch=None, iteration=None, node="analyze"),
        system=prompts.load("system"),
    )
    return require_text(resp, "analyze")
