"""Analyze: the master's first look at the reference (one LLM call, free text)."""

from __future__ import annotations

from cacao_tui import prompts
from cacao_tui.llm import CallContext
from cacao_tui.nodes.context import RunDeps
from cacao_tui.nodes.notes import ANALYSIS_TOPICS, notes_block, problem_topics
from cacao_tui.nodes.problem_brief import problem_brief
from cacao_tui.nodes.replies import ask_text, opening_turn, require_text
from cacao_tui.nodes.target import target_of

TASK = "analyse the problem as the first message asks (the reference, its bottleneck, what to try)."


async def analyze(deps: RunDeps) -> str:
    brief = problem_brief(deps)
    topics = [*ANALYSIS_TOPICS, *problem_topics(deps.problem, target_of(deps).arch)]
    limit = deps.defaults.analysis_chars
    text = prompts.render(
        "analyze",
        problem=brief,
        notes=notes_block(topics, "Optimisation notes").strip(),
        chars=f"{limit:,}",
        words=f"{round(limit / 7.5, -2):,.0f}",
    )
    resp = await ask_text(
        deps.llm,
        opening_turn(text, brief),
        ctx=CallContext(branch=None, iteration=None, node="analyze"),
        system=prompts.load("system"),
        task=TASK,
    )
    return require_text(resp, "analyze")
