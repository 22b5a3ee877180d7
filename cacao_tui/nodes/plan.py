"""Plan: a short brief for the author step of one iteration."""

from __future__ import annotations

from cacao_tui import prompts
from cacao_tui.llm import CallContext, Message
from cacao_tui.nodes.briefing import base_section, history_section, problem_brief
from cacao_tui.nodes.context import BranchView, RunDeps
from cacao_tui.nodes.replies import require_text


async def plan(deps: RunDeps, branch: BranchView) -> str:
    text = prompts.render(
        "plan",
        problem=problem_brief(deps),
        strategy_title=branch.strategy.title,
        strategy_description=branch.strategy.description,
        base=base_section(branch),
        history=history_section(deps, branch),
        iteration=branch.iteration,
    )
    resp = await deps.llm.chat(
        [Message(role="user", content=text)],
        ctx=CallContext(branch=branch.name, iteration=branch.iteration, node="plan"),
        system=prompts.load("system"),
    )
    return require_text(resp, "plan")
