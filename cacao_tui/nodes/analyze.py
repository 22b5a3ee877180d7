"""Analyze: the master's first look at the reference (one LLM call, free text)."""

from __future__ import annotations

from cacao_tui import prompts
from cacao_tui.llm import CallContext
from cacao_tui.nodes.briefing import problem_brief
from cacao_tui.nodes.context import RunDeps
from cacao_tui.nodes.replies import ask_text, opening_turn, require_text

TASK = "analyse the problem as the first message asks (the reference, its bottleneck, what to try)."


async def analyze(deps: RunDeps) -> str:
    brief = problem_brief(deps)
    text = prompts.render("analyze", problem=brief, gpu_notes=prompts.gpu_knowledge(deps.gpu.arch))
    resp = await ask_text(
        deps.llm,
        opening_turn(text, brief),
        ctx=CallContext(branch=None, iteration=None, node="analyze"),
        system=prompts.load("system"),
        task=TASK,
    )
    return require_text(resp, "analyze")
