"""Decide: continue, retry, branch into sub-strategies, or stop — with the fields that carry
the decision into the next iteration (feedback, error analysis, skip_implement, a summary).

The model fills a DecisionReply; the engine turns it into the stored Decision. When the
user has chosen the action (change-decision), the model is told and its other fields are
kept, but the action is the user's. At the iteration budget no model is asked (the worker
stops the branch itself).

When no usable decision comes back (no valid JSON after the repair turn, a refusal, a
call that failed at the provider), a rule decides instead, as the original falls back to a
default decision: continue while the last result improved on the branch's earlier ones,
retry a failed iteration once, else stop. The decision says so (``fallback``); the branch
never fails for it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from cacao_tui import prompts
from cacao_tui.llm import CallContext, CallFailed, Message, ReplyUnusable
from cacao_tui.nodes.branch_queries import outcome_line
from cacao_tui.nodes.briefing import (
    KERNEL_HEAD_LINES,
    clip,
    compiled_dry,
    earlier_states,
    existing_branches_section,
    iteration_log,
    messages_section,
    outcome_text,
    reference_output_line,
)
from cacao_tui.nodes.changes import changes_section
from cacao_tui.nodes.context import BranchView, RunDeps, llm_for
from cacao_tui.nodes.landscape import landscape_summary
from cacao_tui.nodes.problem_brief import target_summary
from cacao_tui.nodes.propose import check_section
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
    """The decision after an iteration: what the branch does next, and what the next iteration is told."""

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


def this_result(deps: RunDeps, state: IterState) -> str:
    if state.error:
        return f"FAILED — {state.error}"
    if compiled_dry(deps, state):
        return "its files compiled (a dry run runs nothing)"
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


MEASURED_FIELDS = """- skip_implement: true when the next iteration keeps this kernel and changes only tuning.yaml
  (e.g. the landscape shows a best value AT THE EDGE of its range).
- start_from: best (default: the branch's fastest kernel so far, maybe an earlier iteration's) or
  latest (this iteration's files: a restructuring that needs another step before it pays); a
  retry and skip_implement continue from this iteration's files. Write the feedback for the
  files the next iteration starts from."""
DRY_RUN_FIELDS = """- skip_implement: false (a dry run tunes nothing).
- start_from: latest (nothing measured: no fastest kernel to return to)."""


def last_note(branch: BranchView) -> str:
    """Said when the next iteration is the last the branch's allowance holds."""
    if branch.iterations_done + 2 != branch.max_iter:
        return ""
    return (
        f"The next iteration ({branch.max_iter} of {branch.max_iter}) is this branch's last: it is written and "
        "tuned, but neither reviewed nor decided on (unless the run's pool grants more to an improving branch). "
        "Ask for a change that completes in one step, or stop.\n"
    )


async def decide(deps: RunDeps, branch: BranchView, state: IterState, path_note: str = "") -> Decision:
    limit = deps.defaults.history_text_chars
    dry = deps.settings.dry_run
    best = "Best time so far in this branch: " + (
        f"{branch.best.time_ms:.4g} ms (iteration {branch.best.iteration})\n" if branch.best else "none yet\n"
    )
    if dry:
        best = ""  # a dry run times nothing
    prev = branch.previous
    asked = ""
    if prev is not None and prev.decision is not None and prev.decision.feedback.strip():
        asked = f"This iteration was asked to: {clip(prev.decision.feedback, limit, 'feedback')}\n"
    is_plateau = plateau(deps, branch, state.run.best_ms if state.run else None)
    forced = branch.forced_action
    if dry:
        landscape = ""
    else:
        landscape = (
            "Tuning landscape of this iteration:\n"
            + landscape_summary(branch.it, _spec(branch), deps.defaults.landscape_top)
            + "\n"
            + reference_output_line(deps, state.run)
        )
    async with llm_for(deps, "decide").slot():  # the branches' statuses as they are when the call is sent
        text = prompts.render(
            "decide",
            device=target_summary(deps),
            failed_step=failed_step_text(branch, state),
            changes="" if state.error is not None and state.author is not None else changes_section(deps, branch),
            check=check_section(state, mix=False),
            landscape=landscape,
            existing=existing_branches_section(deps, branch) if branch.can_branch else "",
            branch=branch.name,
            strategy_title=branch.strategy.title,
            level=branch.depth + 1,
            levels=deps.settings.max_depth,
            iterations_done=branch.iterations_done + 1,
            max_iter=branch.max_iter,
            path_note=path_note,
            last_note=last_note(branch),
            best=best,
            iteration=branch.iteration,
            mode=branch.mode,
            this_result=this_result(deps, state),
            asked=asked,
            proposal=clip(state.proposal, limit, "proposal")
            if state.proposal
            else "(none: the iteration did not get that far)",
            iteration_log=iteration_log(deps, branch),
            messages=messages_section(deps, branch),
            plateau=(
                f"PLATEAU: less than {deps.defaults.plateau_gain:.0%} gain over the last "
                f"{deps.defaults.plateau_iterations} iterations; prefer branch or stop.\n"
                if is_plateau
                else ""
            ),
            user_choice=user_choice(forced),
            max_subs=MAX_SUB_STRATEGIES,
            branch_note="" if branch.can_branch else f" (branching is NOT available here{branch.branch_note})",
            stop_when=(
                "the branch's direction is exhausted or will not pay, judged at compile level"
                if dry
                else "the branch is at the floor, out of ideas, or not worth more iterations"
            ),
            mode_fields=DRY_RUN_FIELDS if dry else MEASURED_FIELDS,
            summary_form=(
                "<what was tried> -> <what the compile check showed> (not timed: a dry run)"
                if dry
                else "<what was tried> -> <measured result> (<diagnosis>)"
            ),
        )
        return await _ask(deps, branch, state, text)


def user_choice(forced: str | None) -> str:
    if not forced:
        return ""
    subs = " (the sub_strategies above all)" if forced == "branch" else ""
    return (
        f"THE USER HAS CHOSEN THE ACTION FOR THIS DECISION: {forced}. Answer with action {forced} "
        f"and fill in the other fields for it{subs}.\n"
    )


async def _ask(deps: RunDeps, branch: BranchView, state: IterState, text: str) -> Decision:
    forced = branch.forced_action
    # The answer's fields and the target come first: the same in every decision of the run (a cached prefix).
    head, _, rest = text.partition("\n----\n")
    turn = [Message(role="user", content=head.strip() + "\n", cache_prefix=True), Message(role="user", content=rest)]
    try:
        reply = await llm_for(deps, "decide").structured(
            turn if rest.strip() else [Message(role="user", content=text)],
            DecisionReply,
            ctx=CallContext(branch=branch.name, iteration=branch.iteration, node="decide"),
            system=prompts.load("system"),
        )
    except (ReplyUnusable, CallFailed) as exc:
        why = exc.reason if isinstance(exc, ReplyUnusable) else str(exc)
        decision = rule_decision(deps, branch, state, why)
        branch.reporter.log(f"no usable decision from the model ({why}); rule-based: {decision.action}", "warning")
        return decision
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
        start_from="latest" if deps.settings.dry_run else reply.start_from,  # nothing measured: no best to go to
    )
    if forced is not None and forced != decision.action:
        decision = decision.model_copy(update={"action": forced, "overridden_from": decision.action})
    return decision


def improved(branch: BranchView, state: IterState) -> bool:
    """This iteration's best beats every earlier one on the branch's line (or is the first)."""
    current = state.run.best_ms if state.run is not None and state.error is None else None
    if not current:
        return False
    earlier = [
        st.run.best_ms
        for st in earlier_states(branch)
        if st.index not in branch.superseded and st.run is not None and st.run.best_ms
    ]
    return not earlier or current < min(earlier)


def _what_was_tried(branch: BranchView, state: IterState) -> str:
    """The authoring step's own summary of what it built, else the iteration's mode."""
    if state.author is not None and state.author.ok and state.author.message:
        return " ".join(state.author.message.split())[:300]
    return branch.mode


def rule_decision(deps: RunDeps, branch: BranchView, state: IterState, why: str) -> Decision:
    """The decision when the model gave none: continue while improving, retry one failure, else stop."""
    limit = deps.defaults.history_text_chars
    previous_failed = branch.previous is not None and branch.previous.error is not None
    forced = branch.forced_action
    if forced is not None:  # a forced branch without sub-strategies continues (the worker says so)
        action, rule = forced, "the user's choice"
    elif state.error is not None and not previous_failed:
        action, rule = "retry", "the iteration failed: retry it once"
    elif state.error is None and improved(branch, state):
        action, rule = "continue", "the result improved on the branch's earlier ones: continue"
    else:
        action = "stop"
        rule = "two failures in a row" if state.error is not None else "no improvement to build on"
    feedback = ""
    if action == "retry":
        feedback = f"The previous iteration failed: {clip(state.error, limit)}. Fix that with the smallest change."
    elif action == "continue" and state.proposal:
        feedback = clip(state.proposal, limit)
    result = f"failed: {' '.join((state.error or '').split())[:200]}" if state.error else outcome_line(state.run)
    return Decision(
        action=action,  # type: ignore[arg-type]
        reason=f"rule-based fallback ({rule}); the model gave no usable decision: {clip(why, 300)}",
        feedback=feedback,
        iteration_summary=f"{_what_was_tried(branch, state)} -> {result} (decided by rule)"[:500],
        automatic=True,
        fallback=clip(why, limit),
        override_id=None,
    )
