"""Plan: the branch's plan, written once per branch and again after the user steers it.

The plan is the brief every authoring step of the branch works from; each iteration's
decision adds its own feedback on top, so there is no plan call per iteration. A user
message or a revert makes the plan stale (BranchManifest.steer_seq), and the next
iteration writes it again, seeing what the user said.
"""

from __future__ import annotations

from cacao_tui import prompts
from cacao_tui.llm import CallContext
from cacao_tui.nodes.briefing import (
    analysis_section,
    branches_section,
    history_section,
    iteration_log,
    last_decision_section,
    messages_section,
    parent_section,
    revert_note,
    start_section,
)
from cacao_tui.nodes.context import BranchView, RunDeps, llm_for
from cacao_tui.nodes.notes import abilities, branch_topics, notes_block
from cacao_tui.nodes.problem_brief import problem_brief
from cacao_tui.nodes.replies import ask_text, opening_turn, require_text
from cacao_tui.nodes.target import target_of

TASK = "write the branch plan the first message asks for."


async def plan(deps: RunDeps, branch: BranchView) -> str:
    again = branch.plan is not None
    task = (
        prompts.render("tasks/plan_again", iteration=branch.iteration)
        if again
        else prompts.load("tasks/plan_first").strip()
    )
    arch = target_of(deps).arch
    shared, own = branch_topics(deps.problem, arch, f"{branch.strategy.title} {branch.strategy.description}")
    llm = llm_for(deps, "plan")
    depth = deps.settings.max_depth
    async with llm.slot():  # the other branches' statuses as they are when the call is sent
        text = prompts.render(
            "plan",
            abilities=abilities(deps.problem, arch) + "\n",
            notes=notes_block([*shared, *own]),
            problem=problem_brief(deps, source=False),
            analysis=analysis_section(deps),
            parent=parent_section(deps, branch),
            branch=branch.name,
            level=branch.depth + 1,
            levels=f"{depth}" + ("; this run opens no sub-branches" if depth == 1 else ""),
            strategy_title=branch.strategy.title,
            strategy_description=branch.strategy.description,
            max_iter=branch.max_iter,
            # A sub-branch's first plan works from its parent's decision and tuning space; its author
            # gets the kernel whole.
            start=start_section(deps, branch, workspace=False, kernel=again or branch.parent is None),
            revert=revert_note(branch),
            iteration_log=iteration_log(deps, branch),
            history=history_section(deps, branch),
            last_decision=(f"Plan so far:\n{branch.plan}\n\n" if again else "") + last_decision_section(deps, branch),
            messages=messages_section(deps, branch),
            branches=branches_section(deps, branch, siblings=True) if branch.parent else "",  # its siblings
            task=task,
        )
        resp = await ask_text(
            llm,
            # The brief, the analysis and what a kernel may use: the same in every plan of the run.
            opening_turn(text, text[: text.index(f"Branch {branch.name} (level ")]),
            ctx=CallContext(branch=branch.name, iteration=branch.iteration, node="plan"),
            system=prompts.load("system"),
            task=TASK,
        )
    return require_text(resp, "plan")
