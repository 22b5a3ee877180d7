"""The texts every prompt shares: the problem brief, the starting kernel, recent history."""

from __future__ import annotations

from cacao_tui import prompts
from cacao_tui.nodes.context import BranchView, RunDeps
from cacao_tui.store.atomic import read_model_or_none
from cacao_tui.store.state import IterState, TuneOutcome
from ktt.problem import Buffer, Problem

MAX_REFERENCE_CHARS = 12_000


def _floor_text(problem: Problem, arch_peak_note: str = "") -> str:
    nbytes, flops = problem.floor()
    parts = []
    if nbytes:
        parts.append(f"{nbytes / 1e6:,.1f} MB moved (~{nbytes / 4.3e12 * 1e3:.3f} ms at 4.3 TB/s)")
    if flops:
        parts.append(f"{flops / 1e9:,.2f} GFLOP (~{flops / 67e12 * 1e3:.3f} ms at 67 TFLOP/s fp32)")
    return "; ".join(parts) + arch_peak_note if parts else "not declared"


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
    source = ref.file.read_text(encoding="utf-8", errors="replace")
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
        floor=_floor_text(p),
        shapes=shapes,
        rules="\n".join(rules) or "- none beyond the evaluation rules",
        gpu_name=deps.gpu.name or "unknown GPU",
        arch=deps.gpu.arch,
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


def base_section(branch: BranchView) -> str:
    if not branch.base_kernel:
        return "There is no earlier kernel in this branch: start from the reference.\n"
    text = f"Starting point ({branch.base_label or 'best so far'}):\n```cuda\n{branch.base_kernel.rstrip()}\n```\n"
    if branch.base_spec:
        text += f"with tuning.yaml:\n```yaml\n{branch.base_spec.rstrip()}\n```\n"
    return text


def _short(text: str | None, limit: int = 400) -> str:
    if not text:
        return "-"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def history_section(deps: RunDeps, branch: BranchView) -> str:
    """The last few decided iterations of this branch (never another branch's)."""
    indices = [i for i in branch.layout.iteration_indices() if i < branch.iteration]
    recent = indices[-deps.defaults.history :] if deps.defaults.history > 0 else []
    if not recent:
        return ""
    lines = ["Recent iterations of this branch:"]
    for i in recent:
        st = read_model_or_none(branch.layout.iteration(i).state, IterState)
        if st is None:
            continue
        decision = f"{st.decision.action}: {_short(st.decision.reason, 200)}" if st.decision else "-"
        lines.append(
            prompts.render(
                "history_entry",
                iteration=i,
                status=st.status,
                plan=_short(st.plan),
                result=outcome_text(st.run) if st.error is None else f"failed: {_short(st.error, 300)}",
                proposal=_short(st.proposal),
                decision=decision,
            ).rstrip()
        )
    return "\n".join(lines) + "\n"
