"""Decide: continue, retry, branch into sub-strategies, or stop — with the fields that carry
the decision into the next iteration (feedback, error analysis, skip_implement, a summary).

The model fills a DecisionReply; the engine turns it into the stored Decision. When the
user has chosen the action (change-decision), the model is told and its other fields are
kept, but the action is the user's. At the iteration budget no model is asked (the worker
stops the branch itself).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from cacao_tui import prompts
from cacao_tui.llm import CallContext, Message
from cacao_tui.nodes.briefing import (
    KERNEL_HEAD_LINES,
    analysis_section,
    clip,
    device_section,
    earlier_states,
    existing_branches_section,
    iteration_log,
    messages_section,
    outcome_text,
)
from cacao_tui.nodes.context import BranchView, RunDeps, llm_for
from cacao_tui.nodes.landscape import landscape_summary
from cacao_tui.nodes.strategize import slug
from cacao_tui.nodes.workspace import read_model_file
from cacao_tui.store.state import (
    MAX_SUB_STRATEGIES,
    Action,
    Decision,
    ErrorAnalysis,
    IterState,
    StartFrom,
    Strategy,
)


class DecisionReply(BaseModel):
    """What the model answers; see prompts/decide.txt."""

    model_config = ConfigDict(extra="ignore")
    action: Action = Field(description="continue | retry | branch | stop")
    reason: str = Field(description="why, in one or two sentences")
    feedback: str = Field(default="", description="concrete instructions for the next iteration's author")
    error_analysis: ErrorAnalysis | None = Field(
        default=None, description="with retry, or whenever this iteration failed: the cause and the smallest fix"
    )
    sub_strategies: list[Strategy] = Field(
        default_factory=list, description=f"with branch: 2 to {MAX_SUB_STRATEGIES} distinct child strategies"
    )
    skip_implement: bool = Field(
        default=False, description="true: the next iteration keeps this kernel and changes only tuning.yaml"
    )
    iteration_summary: str = Field(
        default="", description="one line: <what was tried> -> <measured result> (<diagnosis>)"
    )
    start_from: StartFrom = Field(
        default="best",
        description="the files the next iteration starts from: best (the branch's fastest so far) or latest "
        "(this iteration's); retry and skip_implement always use latest",
    )


def plateau(deps: RunDeps, branch: BranchView, current_ms: float | None) -> bool:
    """Less than plateau_gain improvement over the last plateau_iterations iterations of this line."""
    n = deps.defaults.plateau_iterations
    times = [
        st.run.best_ms
        for st in earlier_states(branch)
        if st.index not in branch.superseded and st.run is not None and st.run.best_ms
    ]
    if current_ms:
        times.append(current_ms)
    if len(times) <= n:
        return False
    before = min(times[:-n])
    recent = min(times[-n:])
    return recent > before * (1 - deps.defaults.plateau_gain)


def this_result(state: IterState) -> str:
    if state.error:
        return f"FAILED — {state.error}"
    return outcome_text(state.run)


def failed_step_text(branch: BranchView, state: IterState) -> str:
    """After a failed authoring step: its last compile errors and the head of the kernel it left."""
    if state.error is None or state.author is None:
        return ""
    parts = []
    if state.author.last_check:
        parts.append(f"The last compile check of the failed step:\n{state.author.last_check.strip()}")
    try:
        kernel = read_model_file(branch.it.kernel) if branch.it.kernel.is_file() else None
    except OSError:
        kernel = None
    if kernel:
        lines = kernel.splitlines()
        head = "\n".join(f"{n:4d}  {line}" for n, line in enumerate(lines[:KERNEL_HEAD_LINES], 1))
        more = f"\n... ({len(lines) - KERNEL_HEAD_LINES} more lines)" if len(lines) > KERNEL_HEAD_LINES else ""
        first = f"kernels.cu as the step left it (the first {KERNEL_HEAD_LINES} lines)"
        parts.append(f"{first}:\n```cuda\n{head}{more}\n```")
    else:
        parts.append("The step left no kernels.cu.")
    steps = state.author
    checks = f"{steps.compile_checks} compile checks, {steps.compile_failures} failed"
    parts.append(f"({steps.tool_calls} tool calls, {checks})")
    return "\n".join(parts) + "\n"


def _spec(branch: BranchView) -> str | None:
    try:
        return read_model_file(branch.it.spec) if branch.it.spec.is_file() else None
    except OSError:
        return None


async def decide(deps: RunDeps, branch: BranchView, state: IterState, path_note: str = "") -> Decision:
    limit = deps.defaults.history_text_chars
    best = "Best time so far in this branch: " + (
        f"{branch.best.time_ms:.4g} ms (iteration {branch.best.iteration})" if branch.best else "none yet"
    )
    prev = branch.previous
    asked = ""
    if prev is not None and prev.decision is not None and prev.decision.feedback.strip():
        asked = f"This iteration was asked to: {clip(prev.decision.feedback, limit)}\n"
    is_plateau = plateau(deps, branch, state.run.best_ms if state.run else None)
    forced = branch.forced_action
    text = prompts.render(
        "decide",
        device=device_section(deps),
        analysis=analysis_section(deps),
        failed_step=failed_step_text(branch, state),
        landscape=landscape_summary(branch.it, _spec(branch), deps.defaults.landscape_top),
        existing=existing_branches_section(deps, branch),
        branch=branch.name,
        strategy_title=branch.strategy.title,
        level=branch.depth + 1,
        levels=deps.settings.max_depth,
        iterations_done=branch.iterations_done + 1,
        max_iter=branch.max_iter,
        path_note=path_note,
        best=best,
        iteration=branch.iteration,
        mode=branch.mode,
        this_result=this_result(state),
        asked=asked,
        proposal=clip(state.proposal, limit) if state.proposal else "(none: the iteration did not get that far)",
        iteration_log=iteration_log(deps, branch),
        messages=messages_section(deps, branch),
        plateau=(
            f"PLATEAU: less than {deps.defaults.plateau_gain:.0%} gain over the last "
            f"{deps.defaults.plateau_iterations} iterations; prefer branch or stop.\n"
            if is_plateau
            else ""
        ),
        user_choice=(
            f"THE USER HAS CHOSEN THE ACTION FOR THIS DECISION: {forced}. Answer with action {forced} "
            "and fill in the other fields for it" + (" (the sub_strategies above all)" if forced == "branch" else "")
            + ".\n"
            if forced
            else ""
        ),
        max_subs=MAX_SUB_STRATEGIES,
        branch_note="" if branch.can_branch else f" (NOT available here{branch.branch_note})",
    )
    reply = await llm_for(deps, "decide").structured(
        [Message(role="user", content=text)],
        DecisionReply,
        ctx=CallContext(branch=branch.name, iteration=branch.iteration, node="decide"),
        system=prompts.load("system"),
    )
    if len(reply.sub_strategies) > MAX_SUB_STRATEGIES:
        branch.reporter.log(
            f"the decision named {len(reply.sub_strategies)} sub-strategies; the first {MAX_SUB_STRATEGIES} are kept",
            "warning",
        )
    subs: list[Strategy] = []
    seen: set[str] = set()
    for i, s in enumerate(reply.sub_strategies[:MAX_SUB_STRATEGIES]):
        name = slug(s.name, f"sub{i + 1}")
        while name in seen:
            name = f"{name}-{i + 1}"
        seen.add(name)
        subs.append(s.model_copy(update={"name": name}))
    decision = Decision(
        action=reply.action,
        reason=reply.reason,
        feedback=reply.feedback,
        error_analysis=reply.error_analysis,
        sub_strategies=subs,
        skip_implement=reply.skip_implement,
        iteration_summary=" ".join(reply.iteration_summary.split())[:500],
        start_from=reply.start_from,
    )
    if forced is not None and forced != decision.action:
        decision = decision.model_copy(update={"action": forced, "overridden_from": decision.action})
    return decision
