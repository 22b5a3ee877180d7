"""Propose: read the timings, failures and profile, and propose the next change."""

from __future__ import annotations

from cacao_tui import prompts
from cacao_tui.llm import CallContext, Message
from cacao_tui.nodes.briefing import history_section, outcome_text, problem_brief
from cacao_tui.nodes.context import BranchView, RunDeps
from cacao_tui.nodes.profile import profile_text
from cacao_tui.nodes.replies import require_text
from cacao_tui.store.state import IterState


async def propose(deps: RunDeps, branch: BranchView, state: IterState) -> str:
    tuning = outcome_text(state.run)
    if state.run and state.run.confirmed:
        tuning += " (best confirmed on a fresh input set)"
    text = prompts.render(
        "propose",
        problem=problem_brief(deps),
        strategy_title=branch.strategy.title,
        iteration=branch.iteration,
        plan=state.plan or "-",
        tuning=tuning,
        profile=profile_text(deps, branch, state.profile),
        history=history_section(deps, branch),
    )
    resp = await deps.llm.chat(
        [Message(role="user", content=text)],
        ctx=CallContext(branch=branch.name, iteration=branch.iteration, node="propose"),
        system=prompts.load("system"),
    )
    return require_text(resp, "propose")
