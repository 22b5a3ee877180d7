"""Decide: continue, retry, branch into sub-strategies, or stop."""

from __future__ import annotations

from cacao_tui import prompts
from cacao_tui.llm import CallContext, Message
from cacao_tui.nodes.briefing import outcome_text
from cacao_tui.nodes.context import BranchView, RunDeps
from cacao_tui.nodes.strategize import slug
from cacao_tui.store.atomic import read_model_or_none
from cacao_tui.store.state import Decision, IterState


def plateau(deps: RunDeps, branch: BranchView, current_ms: float | None) -> bool:
    """Less than plateau_gain improvement over the last plateau_iterations iterations."""
    n = deps.defaults.plateau_iterations
    times: list[float] = []
    for i in branch.layout.iteration_indices():
        if i >= branch.iteration:
            continue
        st = read_model_or_none(branch.layout.iteration(i).state, IterState)
        if st and st.run and st.run.best_ms:
            times.append(st.run.best_ms)
    if current_ms:
        times.append(current_ms)
    if len(times) <= n:
        return False
    before = min(times[:-n])
    recent = min(times[-n:])
    return recent > before * (1 - deps.defaults.plateau_gain)


async def decide(deps: RunDeps, branch: BranchView, state: IterState, path_note: str = "") -> Decision:
    can_branch = branch.depth < deps.settings.max_depth
    best = f"{branch.best.time_ms:.4g} ms (iteration {branch.best.iteration})" if branch.best else "none yet"
    is_plateau = plateau(deps, branch, state.run.best_ms if state.run else None)
    text = prompts.render(
        "decide",
        strategy_title=branch.strategy.title,
        branch=branch.name,
        depth=branch.depth,
        max_depth=deps.settings.max_depth,
        iterations_done=branch.iteration,
        max_iter=branch.max_iter,
        path_note=path_note,
        best=best,
        this_result=outcome_text(state.run),
        proposal=state.proposal or "-",
        plateau=(
            f"\nPLATEAU: less than {deps.defaults.plateau_gain:.0%} gain over the last "
            f"{deps.defaults.plateau_iterations} iterations; prefer branch or stop.\n"
            if is_plateau
            else ""
        ),
        branch_note="" if can_branch else " (NOT available: the depth limit is reached)",
    )
    decision = await deps.llm.structured(
        [Message(role="user", content=text)],
        Decision,
        ctx=CallContext(branch=branch.name, iteration=branch.iteration, node="decide"),
        system=prompts.load("system"),
    )
    subs = []
    seen: set[str] = set()
    for i, s in enumerate(decision.sub_strategies[:3]):
        name = slug(s.name, f"sub{i + 1}")
        while name in seen:
            name = f"{name}-{i + 1}"
        seen.add(name)
        subs.append(s.model_copy(update={"name": name}))
    return decision.model_copy(update={"sub_strategies": subs})
