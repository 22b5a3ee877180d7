"""The texts the branch steps share: the starting kernel, the best, recent history, the other branches."""

from __future__ import annotations

import re

from cacao_tui.nodes.branch_queries import DiskBranches, branch_index_lines, summary_line
from cacao_tui.nodes.context import BranchView, RunDeps, SourceFiles
from cacao_tui.nodes.workspace import read_model_file
from cacao_tui.store.atomic import StateFileError, read_model_or_none
from cacao_tui.store.state import CaseOutcome, IterState, TuneOutcome
from ktt.csource import global_function_lines

EXISTING_CHARS = 160  # one branch's strategy title in the tree decide sees (cut at a word)
KERNEL_HEAD_LINES = 40  # of a failed step's kernels.cu, for decide


def analysis_section(deps: RunDeps) -> str:
    """The master's analysis of the problem, written at the start of the run."""
    if not deps.analysis:
        return ""
    text = clip(deps.analysis, deps.defaults.analysis_chars, "analysis")
    return f"Analysis (written at the start of this run):\n{text}\n"


def outcome_text(run: TuneOutcome | None) -> str:
    if run is None:
        return "not run"
    failures = ", ".join(f"{k} {v}" for k, v in sorted(run.by_status.items()) if k != "ok")
    if not run.ran:
        return run.message or "not run"
    if run.best_ms is None:
        text = f"{run.message or 'no valid configuration'} ({run.evaluated} evaluated"
        return text + (f"; {failures})" if failures else ")")
    text = f"best {run.best_ms:.4g} ms"
    if run.speedup:
        text += f" ({run.speedup:.2f}x over the reference)"
    if run.score is not None:
        text += f", score {run.score:.2f} (geometric mean over shapes)"
        if run.cases:  # each shape over its own reference: where the score can still gain
            text += " [" + "; ".join(_case_text(c) for c in run.cases) + "]"
    text += f", {run.valid}/{run.evaluated} configurations valid"
    if failures:
        text += f"; failures: {failures}"
    if run.best_config:
        text += f"; best config {run.best_config}"
    if run.suspect:
        text += "; SUSPECT: faster than the physical floor"
    if run.message:  # with cases: the case that failed, or was not run
        text += f"; {run.message}"
    return text


def _case_text(case: CaseOutcome) -> str:
    if case.time_ms is None:
        return f"{case.name}: {case.status}"
    text = f"{case.name} {case.time_ms:.4g} ms"
    if case.reference_ms is not None:
        text += f" vs reference {case.reference_ms:.4g} ms"
    if case.speedup:
        text += f" = {case.speedup:.2f}x"
    return text


def clip(text: str | None, limit: int, what: str = "text") -> str:
    """A text cut to about ``limit`` characters (a setting, never a fixed cut): at the end of a
    sentence or a line where one is near, never inside a word, saying what was left out."""
    if not text:
        return "-"
    text = text.strip()
    if len(text) <= limit:
        return text
    room = max(0, limit - 60)
    head = text[:room]
    ends = [head.rfind(m) + len(m) - 1 for m in (". ", ".\n", "\n", "; ", "! ", "? ")]
    end = max(ends)
    if end < room // 2:  # no sentence end near: the last whole word
        end = head.rfind(" ") if head.rfind(" ") > room // 2 else room
    kept = text[: end + 1].rstrip()
    return kept + f" [... cut: the last {len(text) - len(kept):,} characters of the {what} are left out]"


def shorten(text: str, limit: int) -> str:
    """A one-line text kept whole up to ``limit``, else cut after its last whole sentence or word
    that fits, marked with an ellipsis (never inside a word)."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    end = head.rfind(". ")
    if end < limit // 2:
        end = head.rfind(" ")
    return (head[: end + 1] if end > 0 else head).rstrip() + " …"


def source_block(files: SourceFiles, limit: int) -> str:
    parts = []
    if files.kernel is not None:
        parts.append(f"kernels.cu:\n```cuda\n{clip(files.kernel, limit, 'file')}\n```")
    if files.spec is not None:
        parts.append(f"tuning.yaml:\n```yaml\n{clip(files.spec, limit, 'file')}\n```")
    return "\n".join(parts)


def structure(kernel: str | None, spec: str | None) -> tuple[tuple[str, ...], int, bool]:
    """What a kernel is built of: its __global__ functions, how many launches tuning.yaml makes and
    whether they repeat. A plan that steps from one single-launch kernel to the next keeps its
    structure; one launch becoming several (or a repeat loop) changes it."""
    kernels = tuple(sorted(global_function_lines(kernel))) if kernel else ()
    launched = len(_LAUNCHED.findall(spec)) if spec else 0
    return kernels, launched, bool(spec and re.search(r"^\s*-?\s*repeat:", spec, re.MULTILINE))


_LAUNCHED = re.compile(r"^\s*-?\s*kernel:\s*[\"']?([A-Za-z_]\w*)", re.MULTILINE)


def plan_section(deps: RunDeps, branch: BranchView, *, titled: bool = True) -> str:
    """The branch plan in force, in full; or, when the kernel's structure has changed since the
    plan's first kernel (other kernels, other launches), the plan marked superseded with what
    the authoring steps since say the kernel is now (``titled``: with the strategy's title, where
    the prompt does not name it already)."""
    plan = branch.plan or ""
    head = f"Branch plan ({branch.strategy.title})" if titled else "Branch plan"
    if not plan:
        return f"{head}: none.\n"
    written = [st for st in earlier_states(branch) if st.plan and st.index not in branch.superseded]
    if not written or written[-1].plan != plan:  # written in this iteration (the same words in the next ones)
        return f"{head}, written for iteration {branch.iteration}:\n{plan}\n"
    first = written[-1].index
    planned = _files_of(branch, first)
    now = structure(branch.start.kernel, branch.start.spec) if branch.start is not None else None
    if planned is None or now is None or planned[1:] == now[1:] or not planned[0]:
        return f"{head}, written for iteration {first}:\n{plan}\n"
    later = [st for st in earlier_states(branch) if st.index >= first and st.index not in branch.superseded]
    summaries = [f"- iteration {st.index}: {st.author.message}" for st in later
                 if st.author is not None and st.author.ok and st.author.message]  # fmt: skip

    def shape(s: tuple[tuple[str, ...], int, bool]) -> str:
        return f"{', '.join(s[0]) or 'no kernel'} in {s[1]} launch(es)" + (" with a repeat loop" if s[2] else "")

    return (
        f"{head}, written for iteration {first}, is SUPERSEDED: the kernel's structure has changed since "
        f"(then {shape(planned)}; now {shape(now)}). What the authoring steps since say they built:\n"
        + ("\n".join(summaries[-3:]) or "- (no summaries)")
        + "\n"
    )


def _files_of(branch: BranchView, index: int) -> tuple[tuple[str, ...], int, bool] | None:
    it = branch.layout.iteration(index)
    try:
        return structure(read_model_file(it.kernel), read_model_file(it.spec))
    except OSError:
        return None


def start_section(deps: RunDeps, branch: BranchView, *, workspace: bool = True, kernel: bool = True) -> str:
    """The files this iteration starts from (for the author: already in its directory); ``kernel=False``:
    kernels.cu named by its kernels and length only (a sub-branch's plan: the author sees it whole)."""
    start = branch.start
    if start is None or start.kernel is None:
        if workspace:
            return (
                "There are no files yet: this iteration writes the branch's first kernels.cu and tuning.yaml "
                "(write_file); the reference is in the problem above.\n"
            )
        return "There is no earlier kernel in this branch: the first one is written from the reference.\n"
    where = ""
    if workspace:
        configure = branch.mode == "configure"
        kept = " (in your workspace: edit or write tuning.yaml; kernels.cu stays)"
        where = kept if configure else " (in your workspace: edit or write them)"
    if not kernel:
        names = ", ".join(sorted(global_function_lines(start.kernel))) or "no extern \"C\" __global__ function found"
        lines = len(start.kernel.splitlines())
        shown = SourceFiles(kernel=None, spec=start.spec, label=start.label)
        head = f"kernels.cu: {lines} lines, its kernels: {names} (the author step sees it whole)\n"
        return f"Current files, from {start.label}:\n{head}" + source_block(shown, deps.defaults.source_chars) + "\n"
    return f"Current files, from {start.label}{where}:\n" + source_block(start, deps.defaults.source_chars) + "\n"


def best_section(deps: RunDeps, branch: BranchView, current: SourceFiles | None = None) -> str:
    """The branch's best so far; its files only where they are not the ones the prompt shows as
    current (``current``: a review's own iteration files; else the iteration's start)."""
    best = branch.best
    if best is None:
        return "" if deps.settings.dry_run else "Best of this branch so far: none yet.\n"  # a dry run times nothing
    text = f"Best of this branch so far: {best.time_ms:.4g} ms"
    if best.speedup:
        text += f" ({best.speedup:.2f}x over the reference)"
    if best.score is not None:
        text += f", score {best.score:.2f}"
    where = f"iteration {best.iteration}"
    text += f", {where}" if best.branch == branch.name else f", {best.branch} {where}"
    if best.config:
        text += ", config " + ", ".join(f"{k}={v}" for k, v in best.config.items())
    files = branch.best_files
    if current is not None and best.branch == branch.name and best.iteration == branch.iteration:
        text += " (this iteration: the files above)"
    elif current is not None and files is not None and (files.kernel, files.spec) == (current.kernel, current.spec):
        text += " (its files are the same as this iteration's, shown above)"
    elif files is not None and files.kernel is not None:
        text += ". Its files (best/kernels.cu, best/tuning.yaml) differ from the current ones:\n" + source_block(
            files, deps.defaults.source_chars
        )
    elif branch.start is not None and best.branch == branch.name and best.iteration == branch.start.iteration:
        text += " (the current files)"
    return text + "\n"


def compiled_dry(deps: RunDeps, st: IterState) -> bool:
    """A dry run's iteration whose kernel compiled and was kept: its result says nothing the prompt
    does not (nothing ran; the compile check passed)."""
    run = st.run
    return deps.settings.dry_run and st.error is None and run is not None and not run.ran and (run.compiled or 0) > 0


def _decision_lines(st: IterState, limit: int) -> list[str]:
    d = st.decision
    if d is None:
        return []
    how = " (automatic)" if d.automatic else ""
    if d.overridden_from:
        how = f" (chosen by the user; the model chose {d.overridden_from})"
    lines = [f"  Decision: {d.action}{how}: {clip(d.reason, limit)}"]
    if d.skip_implement:
        lines.append("  (configuration only: the next iteration kept the kernel and changed tuning.yaml)")
    if d.feedback.strip():
        lines.append(f"  Feedback: {clip(d.feedback, limit)}")
    if d.error_analysis is not None:
        ea = d.error_analysis
        lines.append(
            f"  Error analysis: {ea.error_type}; cause: {clip(ea.root_cause, limit)}; "
            f"fix: {clip(ea.suggested_fix, limit)}"
        )
    return lines


def earlier_states(branch: BranchView) -> list[IterState]:
    """This branch's earlier iterations that have a state, oldest first (read once per view)."""
    if branch.earlier_cache is not None:
        return branch.earlier_cache
    out = []
    for i in branch.layout.iteration_indices():
        if i >= branch.iteration:
            continue
        try:
            st = read_model_or_none(branch.layout.iteration(i).state, IterState)
        except StateFileError:
            continue
        if st is not None:
            out.append(st)
    branch.earlier_cache = out
    return out


def history_section(deps: RunDeps, branch: BranchView, proposals: bool = True) -> str:
    """The last few decided iterations on this branch's current line, in full (never another branch's);
    ``proposals``: with each one's proposal (its decision's feedback says what came of it)."""
    n = deps.defaults.history
    limit = deps.defaults.history_text_chars
    decided = [st for st in earlier_states(branch) if st.decision is not None and st.index not in branch.superseded]
    recent = decided[-n:] if n > 0 else []
    if not recent:
        return ""
    lines = [f"The last {len(recent)} iteration(s) of this branch in full:"]
    for st in recent:
        mode = "" if st.mode in ("first", "continue") else f" [{st.mode}]"
        lines.append(f"- iteration {st.index}{mode}: {st.status}")
        if st.plan and st.plan != branch.plan:
            lines.append(f"  Plan (written then): {clip(st.plan, limit, 'plan')}")
        if not compiled_dry(deps, st):
            result = outcome_text(st.run) if st.error is None else "failed: " + clip(st.error, limit)
            lines.append(f"  Result: {result}")
        if st.profile is not None and st.profile.roofline:
            lines.append(f"  Profile: {st.profile.roofline}")
        if st.proposal and (proposals or st.decision is None or not st.decision.feedback.strip()):
            lines.append(f"  Proposal: {clip(st.proposal, limit, 'proposal')}")
        lines += _decision_lines(st, limit)
    return "\n".join(lines) + "\n"


def iteration_log(deps: RunDeps, branch: BranchView) -> str:
    """One line per earlier iteration (the decisions' iteration summaries), superseded ones marked."""
    states = [st for st in earlier_states(branch) if st.decision is not None or st.index in branch.superseded]
    n = deps.defaults.iteration_log
    shown = states[-n:] if n > 0 else []
    if not shown:
        return ""
    lines = ["Iteration log (what was tried -> what happened):"]
    if len(states) > len(shown):
        lines.append(f'- ... {len(states) - len(shown)} earlier iteration(s) (history(what="iterations") lists them)')
    for st in shown:
        flag = " (superseded by a revert)" if st.index in branch.superseded else ""
        lines.append(f"- iter {st.index}{flag}: {clip(summary_line(st), deps.defaults.history_text_chars)}")
    return "\n".join(lines) + "\n"


def asked_line(deps: RunDeps, branch: BranchView) -> str:
    """What the previous decision asked of this iteration (its feedback; with a retry, the fix)."""
    prev = branch.previous
    if prev is None or prev.decision is None:
        return ""
    limit = deps.defaults.history_text_chars
    d = prev.decision
    text = ""
    if d.feedback.strip():
        text = f"This iteration was asked to ({d.action}): {clip(d.feedback, limit, 'feedback')}\n"
    if d.error_analysis is not None:
        text += f"The fix asked for: {clip(d.error_analysis.suggested_fix, limit)}\n"
    return text


def last_decision_section(deps: RunDeps, branch: BranchView) -> str:
    """What the previous decision asked of this iteration: its feedback and error analysis."""
    prev = branch.previous
    if prev is None or prev.decision is None:
        return ""
    limit = deps.defaults.history_text_chars
    d = prev.decision
    lines = [f"Decision after iteration {prev.index}: {d.action}."]  # the feedback is the task; the reason, the record
    if d.overridden_from:
        lines.append(f"(The user chose {d.action}; the model had chosen {d.overridden_from}.)")
    if d.feedback.strip():
        lines.append(f"Feedback for this iteration: {clip(d.feedback, limit, 'feedback')}")
    if d.error_analysis is not None:
        ea = d.error_analysis
        lines.append(f"Error analysis ({ea.error_type}): cause: {clip(ea.root_cause, limit)}")
        lines.append(f"Suggested fix: {clip(ea.suggested_fix, limit)}")
    return "\n".join(lines) + "\n"


def reference_output_line(deps: RunDeps, run: TuneOutcome | None) -> str:
    """The reference's time and its result per validated buffer (the tuner's), and the tolerance
    against it: what a tuning learnt about the reference after the brief was written."""
    if run is None or (not run.reference_stats and run.reference_ms is None):
        return ""
    timed = ""
    if run.reference_ms is not None:
        how = "seeded by hand" if run.reference_source == "seeded" else "measured by the tuner"
        timed = f"Reference time: {run.reference_ms:.4g} ms ({how}).\n"
    if not run.reference_stats:
        return timed
    parts = []
    for s in run.reference_stats:
        if s.mean_abs is None:
            parts.append(f"{s.buffer}: no finite value")
            continue
        tol = deps.problem.tolerance
        share = f"; the tolerance {tol:g} is {100 * tol / s.mean_abs:.2g}% of it" if s.mean_abs else ""
        parts.append(f"{s.buffer}: min {s.min:.4g}, max {s.max:.4g}, mean |x| {s.mean_abs:.4g}{share}")
    return timed + "Reference output (first input set): " + "; ".join(parts) + "\n"


def previous_result_section(deps: RunDeps, branch: BranchView) -> str:
    prev = branch.previous
    if prev is None:
        return ""
    limit = deps.defaults.history_text_chars
    result = outcome_text(prev.run) if prev.error is None else "failed: " + clip(prev.error, limit)
    text = "" if compiled_dry(deps, prev) else f"Iteration {prev.index} result: {result}\n"
    text += reference_output_line(deps, prev.run)
    if prev.profile is not None and prev.profile.diagnosis:
        text += f"Iteration {prev.index} profile diagnosis:\n{prev.profile.diagnosis}\n"
    if prev.proposal and (prev.decision is None or not prev.decision.feedback.strip()):  # else the feedback has it
        text += f"Iteration {prev.index} proposal: {clip(prev.proposal, limit, 'proposal')}\n"
    return text


def messages_section(deps: RunDeps, branch: BranchView) -> str:
    n = deps.defaults.user_messages
    shown = branch.messages[-n:] if n > 0 else []
    if not shown:
        return ""
    lines = ["Messages from the user to this branch (newest last; they take precedence over the plan):"]
    if len(branch.messages) > len(shown):
        lines.append(f"- ({len(branch.messages) - len(shown)} earlier message(s) not shown)")
    for m in shown:
        when = f" (during iteration {m.iteration})" if m.iteration else ""
        lines.append(f"- {m.text.strip()}{when}")
    return "\n".join(lines) + "\n"


def branches_section(deps: RunDeps, branch: BranchView, *, siblings: bool = False) -> str:
    """The other branches, fastest first, so this one does not repeat them (``siblings``: only those
    that share its parent)."""
    if branch.run is None:
        return ""
    lines = branch_index_lines(branch.run, branch.name, deps.defaults.branch_index_rows, deps.branches)
    if siblings:  # a sub-branch's plan: the branches that start where it does
        lines = [line for line in lines if f" (from {branch.parent}) |" in line]
    if not lines:
        return ""
    where = f"This branch: {branch.name}" + (f", a sub-branch of {branch.parent}" if branch.parent else "")
    columns = "name | status | iterations | best | strategy"
    if deps.settings.dry_run:  # nothing is timed: no best to show
        columns = columns.replace(" | best", "")
        lines = [line.replace(" | no result yet | ", " | ") for line in lines]
    head = f"Other branches of this run ({columns}). {where}."
    return head + "\n" + "\n".join(lines) + "\n"


def revert_note(branch: BranchView) -> str:
    if branch.reverted_to is None:
        return ""
    later = sorted(i for i in branch.superseded if i > branch.reverted_to)
    gone = f"; iterations {', '.join(map(str, later))} are superseded (kept on disk, off this line)" if later else ""
    return f"The user reverted this branch to iteration {branch.reverted_to}{gone}.\n"


def parent_section(deps: RunDeps, branch: BranchView, *, proposal: bool = True) -> str:
    """What a child branch (or the polish) inherits: the parent iteration it starts from —
    its proposal, its profile diagnosis, and why the parent's decision opened this branch
    (``proposal=False``: the proposal only where the decision gave no feedback, as for the
    previous iteration of a continuing branch)."""
    if branch.run is None or branch.parent is None or branch.parent_iteration is None:
        return ""
    path = branch.run.branch(branch.parent).iteration(branch.parent_iteration).state
    try:
        st = read_model_or_none(path, IterState)
    except StateFileError:
        return ""
    if st is None:
        return ""
    limit = deps.defaults.history_text_chars
    lines = [f"The parent branch {branch.parent}, iteration {branch.parent_iteration} (where this branch starts):"]
    if not compiled_dry(deps, st):
        lines.append(f"- result: {outcome_text(st.run) if st.error is None else 'failed: ' + clip(st.error, limit)}")
    if st.profile is not None and st.profile.diagnosis:
        lines.append("- profile diagnosis:\n" + "\n".join(f"  {x}" for x in st.profile.diagnosis.splitlines()))
    elif st.profile is not None and st.profile.roofline:
        lines.append(f"- profile: {st.profile.roofline}")
    feedback = st.decision is not None and st.decision.feedback.strip()
    if st.proposal and (proposal or not feedback):
        lines.append(f"- proposal: {clip(st.proposal, limit)}")
    if st.decision is not None:
        lines.append(f"- decision: {st.decision.action}: {clip(st.decision.reason, limit)}")
        if st.decision.feedback.strip():
            lines.append(f"- its feedback: {clip(st.decision.feedback, limit)}")
    return "\n".join(lines) + "\n\n"


def existing_branches_section(deps: RunDeps, branch: BranchView) -> str:
    """Every branch of the run as a tree (strategy, status, best), for decide: a sub-strategy
    must not repeat one of them."""
    if branch.run is None:
        return ""
    directory = deps.branches if deps.branches is not None else DiskBranches(branch.run)
    manifests = [m for n in directory.names() if (m := directory.manifest(n)) is not None]
    if len(manifests) <= 1:
        return ""
    limit = max(1, deps.defaults.branch_index_rows) * 4
    children: dict[str | None, list] = {}
    for m in manifests:
        children.setdefault(m.parent, []).append(m)
    lines: list[str] = []

    def walk(parent: str | None, depth: int) -> None:
        for m in children.get(parent, []):
            if len(lines) >= limit:
                return
            best = f", best {m.best.time_ms:.4g} ms" if m.best else ("" if deps.settings.dry_run else ", no result yet")
            mark = " (this branch)" if m.name == branch.name else ""
            what = shorten(" ".join(m.strategy.title.split()), EXISTING_CHARS)
            lines.append(f"{'  ' * depth}- {m.name}{mark} [{m.status}{best}] {what}")
            walk(m.name, depth + 1)

    walk(None, 0)
    more = len(manifests) - len(lines)
    tail = f"\n- ... and {more} more" if more > 0 else ""
    head = "Existing branches of this run (do not open a sub-branch that repeats one):\n"
    return head + "\n".join(lines) + tail + "\n"
