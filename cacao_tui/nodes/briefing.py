"""The texts every prompt shares: the problem brief, the starting kernel, recent history."""

from __future__ import annotations

from cacao_tui import prompts
from cacao_tui.nodes.branch_queries import DiskBranches, branch_index_lines, summary_line
from cacao_tui.nodes.context import BranchView, RunDeps, SourceFiles
from cacao_tui.store.atomic import StateFileError, read_model_or_none
from cacao_tui.store.state import IterState, TuneOutcome
from ktt.capped_read import MAX_SOURCE_BYTES, describe_read_error, read_text_capped
from ktt.device_table import device_lines
from ktt.occupancy import limits_for
from ktt.peaks import NAMES, datasheet_peaks, flops_peak
from ktt.problem import Buffer, Problem
from ktt.protocol import DeviceReport

MAX_REFERENCE_CHARS = 12_000
EXISTING_CHARS = 200  # one branch's strategy in the tree decide sees
KERNEL_HEAD_LINES = 40  # of a failed step's kernels.cu, for decide


def floor_text(problem: Problem, device: DeviceReport | None) -> str:
    """The problem's bytes and flops, and the time each takes on the device measured for this run."""
    nbytes, flops = problem.floor()
    parts = []
    bandwidth = device.copy_bandwidth_gbs or device.theoretical_bandwidth_gbs if device is not None else None
    if nbytes:
        text = f"{nbytes / 1e6:,.1f} MB moved"
        if bandwidth:
            how = "measured" if device is not None and device.copy_bandwidth_gbs else "theoretical"
            text += f" (~{nbytes / (bandwidth * 1e9) * 1e3:.4g} ms at this GPU's {how} {bandwidth:,.0f} GB/s)"
        parts.append(text)
    if flops:
        parts.append(_flops_text(flops, problem.floor_flops_dtype, device))
    if not parts:
        return "not declared"
    floor = "; ".join(parts)
    return floor if device is not None else floor + " (no device was measured for this run: no time floor)"


def _flops_text(flops: float, dtype: str, device: DeviceReport | None) -> str:
    """The flops against the peak the tuner's floor uses (physical_floor.flops_dtype, ktt.peaks)."""
    text = f"{flops / 1e9:,.2f} GFLOP"
    if device is None:
        sheets = datasheet_peaks(dtype)
        if sheets:
            part, tflops = sheets[0]
            text += f" (~{flops / (tflops * 1e12) * 1e3:.3f} ms at {tflops:g} TFLOP/s {dtype} on {part})"
        return text
    peak = flops_peak(dtype, device.name, device.arch, device.sm_count, round(device.clock_mhz * 1000))
    if peak.gflops:
        text += f" (~{flops / (peak.gflops * 1e9) * 1e3:.4g} ms at this GPU's {NAMES[dtype]} peak"
        text += f" {peak.gflops / 1e3:,.1f} TFLOP/s: {peak.source})"
    else:
        text += f" ({peak.source})"
    return text


def device_section(deps: RunDeps) -> str:
    """The device table measured at the start of the run (or what is known without one)."""
    if deps.device is not None:
        table = "\n".join(f"- {line}" for line in device_lines(deps.device))
        return "Target GPU (measured at the start of this run):\n" + table
    limits = limits_for(deps.gpu.arch)
    text = f"Target GPU: {deps.gpu.name or 'unknown GPU'} ({deps.gpu.arch}); no device table was measured"
    text += " (a dry run)" if deps.settings.dry_run else ""
    if limits is not None:
        text += (
            f". {deps.gpu.arch} limits: {limits.max_warps_per_sm} warps and {limits.max_blocks_per_sm} blocks per SM, "
            f"{limits.regs_per_sm:,} registers per SM, {limits.smem_per_sm // 1024} KiB shared memory per SM "
            f"({limits.smem_per_block_optin // 1024} KiB per block with the opt-in attribute)"
        )
    return text + "."


def analysis_section(deps: RunDeps) -> str:
    """The master's analysis of the problem, written at the start of the run."""
    if not deps.analysis:
        return ""
    text = clip(deps.analysis, deps.defaults.analysis_chars)
    return f"Analysis of the problem (written at the start of this run):\n{text}\n"


def _buffers_text(problem: Problem) -> str:
    out = []
    for b in problem.buffers:
        n = problem.primary.sizes[b.name]
        flags = [b.access] + (["validated"] if b.validate else [])
        out.append(f"{b.name} ({b.ctype}[{b.size.text}] = {n:,} elements, {', '.join(flags)})")
    return "; ".join(out)


def _description(p: Problem) -> str:
    """The description, and the gpu.* metadata of problem.yaml (advisory: the GPU it was written for)."""
    text = p.description or "(no description)"
    info = {k: v for k, v in p.gpu_info.items() if k != "compute_capability"}
    if info:
        text += "\nproblem.yaml describes its GPU as: " + ", ".join(f"{k} {v}" for k, v in info.items())
    return text


def problem_brief(deps: RunDeps) -> str:
    if deps._brief is not None:
        return deps._brief
    p = deps.problem
    ref = p.reference
    try:
        source = read_text_capped(ref.file, MAX_SOURCE_BYTES, errors="replace")  # checked at load; read again
    except OSError as exc:
        source = f"(the reference could not be read: {describe_read_error(exc)})"
    if len(source) > MAX_REFERENCE_CHARS:
        source = source[:MAX_REFERENCE_CHARS] + "\n... (truncated)"
    defines = ", ".join(f"{k}={v}" for k, v in p.defines().items()) or "none"
    rules = [f"- {t}" for t in p.rules_text]
    rules += [f"- forbidden: /{r.pattern.pattern}/" + (f" ({r.reason})" if r.reason else "") for r in p.forbid]
    shapes = "; ".join(f"{s.name}: " + ", ".join(f"{k}={v}" for k, v in s.scalars.items()) for s in p.shapes)
    if p.declared_cases:
        shapes += " (score = geometric mean of the per-shape speedups; every shape must pass)"
    budget = deps.settings.timeout_s or p.primary.duration_s
    deps._brief = prompts.render(
        "problem_brief",
        name=p.name,
        description=_description(p),
        signature=p.boundary_signature() or "(no parameters)",
        defines=defines,
        buffers=_buffers_text(p),
        reference_type=ref.type,
        reference_file=ref.file.name,
        grid=str(p.primary.grid),
        block=str(ref.block),
        reference_source=source.rstrip(),
        tolerance=p.tolerance,
        validated=", ".join(b.name for b in p.buffers if isinstance(b, Buffer) and b.validate),
        floor=floor_text(p, deps.device),
        shapes=shapes,
        rules="\n".join(rules) or "- none beyond the evaluation rules",
        device=device_section(deps),
        budget_s=f"{budget:g}",
    )
    return deps._brief


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


def clip(text: str | None, limit: int) -> str:
    """A text cut to ``limit`` characters (a setting, never a fixed cut), saying so when it was."""
    if not text:
        return "-"
    text = text.strip()
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 40)].rstrip() + f" ... [cut at {limit:,} characters]"


def source_block(files: SourceFiles, limit: int) -> str:
    parts = []
    if files.kernel is not None:
        parts.append(f"kernels.cu:\n```cuda\n{clip(files.kernel, limit)}\n```")
    if files.spec is not None:
        parts.append(f"tuning.yaml:\n```yaml\n{clip(files.spec, limit)}\n```")
    return "\n".join(parts)


def start_section(deps: RunDeps, branch: BranchView, *, workspace: bool = True) -> str:
    """The files this iteration starts from (for the author: already in its directory)."""
    start = branch.start
    if start is None or start.kernel is None:
        return "There is no earlier kernel in this branch: the first one starts from the reference.\n"
    where = (
        " (already in your workspace as kernels.cu and tuning.yaml: change them with edit_file, "
        "or replace them with write_file)"
        if workspace
        else ""
    )
    return f"Current files, from {start.label}{where}:\n" + source_block(start, deps.defaults.source_chars) + "\n"


def best_section(deps: RunDeps, branch: BranchView) -> str:
    best = branch.best
    if best is None:
        return "Best of this branch so far: none yet.\n"
    text = f"Best of this branch so far: {best.time_ms:.4g} ms"
    if best.speedup:
        text += f" ({best.speedup:.2f}x over the reference)"
    if best.score is not None:
        text += f", score {best.score:.2f}"
    where = f"iteration {best.iteration}"
    text += f", {where}" if best.branch == branch.name else f", {best.branch} {where}"
    if best.config:
        text += ", config " + ", ".join(f"{k}={v}" for k, v in best.config.items())
    if branch.best_files is not None and branch.best_files.kernel is not None:
        text += (
            ". Its files (best/kernels.cu, best/tuning.yaml) differ from the current ones:\n"
            + source_block(branch.best_files, deps.defaults.source_chars)
        )
    elif branch.start is not None and best.branch == branch.name and best.iteration == branch.start.iteration:
        text += " (the current files)"
    return text + "\n"


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


def history_section(deps: RunDeps, branch: BranchView) -> str:
    """The last few decided iterations on this branch's current line, in full (never another branch's)."""
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
        if st.plan:
            lines.append(f"  Plan (written then): {clip(st.plan, limit)}")
        lines.append(f"  Result: {outcome_text(st.run) if st.error is None else 'failed: ' + clip(st.error, limit)}")
        if st.profile is not None and st.profile.roofline:
            lines.append(f"  Profile: {st.profile.roofline}")
        if st.proposal:
            lines.append(f"  Proposal: {clip(st.proposal, limit)}")
        lines += _decision_lines(st, limit)
    return "\n".join(lines) + "\n"


def iteration_log(deps: RunDeps, branch: BranchView) -> str:
    """One line per earlier iteration (the decisions' iteration summaries), superseded ones marked."""
    states = [st for st in earlier_states(branch) if st.decision is not None or st.index in branch.superseded]
    n = deps.defaults.iteration_log
    shown = states[-n:] if n > 0 else []
    if not shown:
        return ""
    lines = ["Iteration log of this branch (what was tried -> what happened):"]
    if len(states) > len(shown):
        lines.append(f"- ... {len(states) - len(shown)} earlier iteration(s) (list_iterations shows them)")
    for st in shown:
        flag = " (superseded by a revert)" if st.index in branch.superseded else ""
        lines.append(f"- iter {st.index}{flag}: {clip(summary_line(st), deps.defaults.history_text_chars)}")
    return "\n".join(lines) + "\n"


def last_decision_section(deps: RunDeps, branch: BranchView) -> str:
    """What the previous decision asked of this iteration: its feedback and error analysis."""
    prev = branch.previous
    if prev is None or prev.decision is None:
        return ""
    limit = deps.defaults.history_text_chars
    d = prev.decision
    lines = [f"Decision after iteration {prev.index}: {d.action} — {clip(d.reason, limit)}"]
    if d.overridden_from:
        lines.append(f"(The user chose {d.action}; the model had chosen {d.overridden_from}.)")
    if d.feedback.strip():
        lines.append(f"Feedback for this iteration: {clip(d.feedback, limit)}")
    if d.error_analysis is not None:
        ea = d.error_analysis
        lines.append(f"Error analysis ({ea.error_type}): cause: {clip(ea.root_cause, limit)}")
        lines.append(f"Suggested fix: {clip(ea.suggested_fix, limit)}")
    return "\n".join(lines) + "\n"


def previous_result_section(deps: RunDeps, branch: BranchView) -> str:
    prev = branch.previous
    if prev is None:
        return ""
    limit = deps.defaults.history_text_chars
    result = outcome_text(prev.run) if prev.error is None else "failed: " + clip(prev.error, limit)
    text = f"Iteration {prev.index} result: {result}\n"
    if prev.profile is not None and prev.profile.diagnosis:
        text += f"Iteration {prev.index} profile diagnosis:\n{prev.profile.diagnosis}\n"
    if prev.proposal:
        text += f"Iteration {prev.index} proposal: {clip(prev.proposal, limit)}\n"
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


def branches_section(deps: RunDeps, branch: BranchView) -> str:
    """The other branches, fastest first, so this one does not repeat them."""
    if branch.run is None:
        return ""
    lines = branch_index_lines(branch.run, branch.name, deps.defaults.branch_index_rows, deps.branches)
    if not lines:
        return ""
    where = f"This branch: {branch.name}" + (f", a sub-branch of {branch.parent}" if branch.parent else "")
    head = f"Other branches of this run (name | status | iterations | best | strategy). {where}."
    return head + "\n" + "\n".join(lines) + "\n"


def revert_note(branch: BranchView) -> str:
    if branch.reverted_to is None:
        return ""
    later = sorted(i for i in branch.superseded if i > branch.reverted_to)
    gone = f"; iterations {', '.join(map(str, later))} are superseded (kept on disk, off this line)" if later else ""
    return f"The user reverted this branch to iteration {branch.reverted_to}{gone}.\n"


def parent_section(deps: RunDeps, branch: BranchView) -> str:
    """What a child branch (or the polish) inherits: the parent iteration it starts from —
    its proposal, its profile diagnosis, and why the parent's decision opened this branch."""
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
    lines.append(f"- result: {outcome_text(st.run) if st.error is None else 'failed: ' + clip(st.error, limit)}")
    if st.profile is not None and st.profile.diagnosis:
        lines.append("- profile diagnosis:\n" + "\n".join(f"  {x}" for x in st.profile.diagnosis.splitlines()))
    elif st.profile is not None and st.profile.roofline:
        lines.append(f"- profile: {st.profile.roofline}")
    if st.proposal:
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
            best = f"best {m.best.time_ms:.4g} ms" if m.best else "no result yet"
            mark = " (this branch)" if m.name == branch.name else ""
            what = " ".join(f"{m.strategy.title}: {m.strategy.description}".split())[:EXISTING_CHARS]
            lines.append(f"{'  ' * depth}- {m.name}{mark} [{m.status}, {best}] {what}")
            walk(m.name, depth + 1)

    walk(None, 0)
    more = len(manifests) - len(lines)
    tail = f"\n- ... and {more} more" if more > 0 else ""
    head = "Existing branches of this run (do not open a sub-branch that repeats one):\n"
    return head + "\n".join(lines) + tail + "\n"
