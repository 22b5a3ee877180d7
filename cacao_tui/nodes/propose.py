"""Propose: read what this iteration measured and propose the next change.

It sees the problem with the device table, the analysis, the iteration's own kernel and
tuning space, the tuning result and its landscape (the fastest configurations, each
parameter's best value and whether it sits at the edge of its range, the failures), the
profile's diagnosis and Nsight Compute metrics with their change since the last profiled
iteration, the branch's best so far, its history and log, and the other branches.
"""

from __future__ import annotations

from pathlib import Path

from cacao_tui import prompts
from cacao_tui.llm import CallContext
from cacao_tui.nodes.briefing import (
    analysis_section,
    asked_line,
    best_section,
    branches_section,
    earlier_states,
    iteration_log,
    messages_section,
    outcome_text,
    plan_section,
    reference_output_line,
    source_block,
)
from cacao_tui.nodes.context import BranchView, RunDeps, SourceFiles
from cacao_tui.nodes.landscape import landscape_summary
from cacao_tui.nodes.problem_brief import problem_brief
from cacao_tui.nodes.profile import profile_text
from cacao_tui.nodes.replies import ask_text, opening_turn, require_text
from cacao_tui.nodes.workspace import read_model_file
from cacao_tui.store.state import MAX_SUB_STRATEGIES, IterState

TASK = "read the measurements of this iteration and propose the next change, as the first message asks."
MODE_TEXT = {
    "first": "the branch's first kernel",
    "continue": "a change to the previous kernel",
    "retry": "a fix of the previous iteration's failure",
    "configure": "configuration only: the previous kernel, a new tuning space",
    "polish": "the polish of the run's best kernel",
}


def _read(path: Path) -> str | None:
    try:
        return read_model_file(path) if path.is_file() else None
    except OSError:
        return None


def last_profiled(branch: BranchView) -> tuple[int, Path] | None:
    """The latest earlier iteration on this branch's line that has a profile."""
    for st in reversed(earlier_states(branch)):
        if st.index not in branch.superseded and st.profile is not None and st.profile.ran:
            return st.index, branch.layout.iteration(st.index).profile
    return None


def branching_text(deps: RunDeps, branch: BranchView) -> str:
    if branch.can_branch:
        return (
            f"Branching is possible: a decision may open up to {MAX_SUB_STRATEGIES} sub-branches from this "
            f"kernel (level {branch.depth + 2} of {deps.settings.max_depth}).\n"
        )
    return f"Branching is not possible here{branch.branch_note}: propose a change within this branch.\n"


ASK_MEASURED = (
    "Interpret these results. Where does the time go (the two leading bottlenecks of the diagnosis, "
    "memory throughput against the floor, occupancy and what limits it)? Did the change of this iteration "
    "do what its plan predicted? Propose the single most valuable next change and predict its effect; if only "
    "the tuning space should change (a best value at the edge of its range, wider or different values, same "
    "kernel), say so. Under 250 words."
)
ASK_DRY_RUN = (
    "Nothing was timed or profiled (a dry run), so review the kernel at compile level: from the "
    "compile check (resources, occupancy and its limit, the instruction mix: arithmetic per load, MUFU, shared "
    "traffic, barriers) and the code (coalescing, bank conflicts, vector widths, work per thread), predict "
    "where the time would go against the physical floor, and propose the single most valuable next change. "
    "Under 250 words."
)


def check_section(state: IterState, mix: bool = True) -> str:
    """The compile check that accepted this iteration's files, as the author read it (``mix``: with
    its instruction mix)."""
    report = state.author.check_report if state.author is not None else None
    if not report:
        return ""
    if not mix:
        report = report.split("\nInstruction mix")[0]
    return f"Compile check of these files:\n{report.strip()}\n"


async def propose(deps: RunDeps, branch: BranchView, state: IterState) -> str:
    dry = deps.settings.dry_run
    tuning = outcome_text(state.run)
    if state.run and state.run.confirmed:
        tuning += " (best confirmed on a fresh input set)"
    it = branch.it
    current = SourceFiles(kernel=_read(it.kernel), spec=_read(it.spec), label=f"iteration {branch.iteration}")
    source = source_block(current, deps.defaults.source_chars)
    if dry:
        measured = ""  # the question says it: nothing was timed or profiled
    else:
        landscape = landscape_summary(it, _read(it.spec), deps.defaults.landscape_top)
        tuned = state.run.best_ms if state.run is not None else None
        profile = profile_text(deps, branch, state.profile, last_profiled(branch), tuned)
        measured = (
            f"Tuning result: {tuning}\n\nTuning landscape:\n{landscape}\n\n"
            f"Profile of the best configuration (Nsight Compute):\n{profile}\n"
        )
    async with deps.llm.slot():  # the other branches' statuses as they are when the call is sent
        text = prompts.render(
            "propose",
            problem=problem_brief(deps, source=False),
            branch=branch.name,
            strategy_title=branch.strategy.title,
            iteration=branch.iteration,
            mode=MODE_TEXT.get(branch.mode, branch.mode),
            plan=plan_section(deps, branch, titled=False),  # the header above names the strategy
            source=source or "(no files)",
            check=check_section(state),
            measured=measured,
            analysis=analysis_section(deps),
            best=best_section(deps, branch, current),
            reference_output=reference_output_line(deps, state.run),
            iteration_log=iteration_log(deps, branch),
            history=asked_line(deps, branch),  # the iterations before it: one line each, in the log
            messages=messages_section(deps, branch),
            branches=branches_section(deps, branch) if branch.can_branch else "",  # what a sub-branch must not repeat
            branching=branching_text(deps, branch),
            method=ASK_DRY_RUN if dry else ASK_MEASURED,
        )
        resp = await ask_text(
            deps.llm,
            # The brief, the analysis and how a review goes: the same in every review of the run.
            opening_turn(text, text[: text.index(f"Branch {branch.name}: ")]),
            ctx=CallContext(branch=branch.name, iteration=branch.iteration, node="propose"),
            system=prompts.load("system"),
            task=TASK,
        )
    return require_text(resp, "propose")
