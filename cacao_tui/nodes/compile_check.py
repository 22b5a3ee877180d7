"""check_compilation: forbid rules first, then NVRTC (through ktt) over a sample of configurations."""

from __future__ import annotations

from dataclasses import dataclass

from cacao_tui.ktt_client import TunerError
from cacao_tui.nodes.branch_queries import outcome_line
from cacao_tui.nodes.context import BranchView, RunDeps
from cacao_tui.nodes.fingerprint import binary_fingerprint, source_fingerprint
from cacao_tui.nodes.tuner_output import config_text
from cacao_tui.nodes.workspace import read_model_file
from ktt.capped_read import describe_read_error
from ktt.protocol import CheckReport

MAX_REPORTED = 12
MAX_RESOURCE_LINES = 8


@dataclass
class CheckOutcome:
    ok: bool
    text: str  # what the model reads
    report: CheckReport | None = None
    fingerprints: tuple[str | None, str | None] = (None, None)  # source, binary (nodes/fingerprint.py)


def _source_line(source: str, line: int | None) -> str:
    if not line:
        return ""
    lines = source.splitlines()
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""


def resource_lines(report: CheckReport, limit: int = MAX_RESOURCE_LINES) -> list[str]:
    """Per sampled configuration: registers, spills, shared memory and the occupancy they allow."""
    out: list[str] = []
    for cfg in report.configs:
        if not cfg.resources:
            continue
        shape = f" [{cfg.shape}]" if cfg.shape != "default" else ""
        parts = []
        occ = {o.kernel: o for o in cfg.occupancy}
        for r in cfg.resources:
            text = f"{r.kernel}: {r.registers} registers/thread"
            if r.spill_stores or r.spill_loads:
                text += f", SPILLS {r.spill_stores} B stored / {r.spill_loads} B loaded"
            elif r.stack_bytes:
                text += f", {r.stack_bytes} B stack (local memory)"
            o = occ.get(r.kernel)
            smem = o.smem_bytes if o is not None else (r.smem_static or 0)
            text += f", {smem:,} B shared/block"
            if o is not None:
                text += (
                    f", {o.threads} threads/block -> {o.blocks_per_sm} blocks/SM, occupancy {o.occupancy:.0%} "
                    f"(limited by {o.limiter})"
                )
            parts.append(text)
        out.append(f"  config {config_text(cfg.config)}{shape}: " + "; ".join(parts))
        if len(out) >= limit:
            break
    return out


def format_report(report: CheckReport, source: str) -> str:
    if report.ok:
        n_ok = sum(1 for c in report.configs if c.ok)
        size = report.restricted_size if report.restricted_size is not None else report.space_size
        head = (
            f"compile check passed: {n_ok}/{len(report.configs)} sampled configurations compiled "
            f"(space: {size} configurations after restrictions)."
        )
        resources = resource_lines(report)
        if not resources:
            return head
        return head + "\nResources (ptxas) and the occupancy they allow:\n" + "\n".join(resources)
    out = ["compile check FAILED."]
    has_diagnostics = any(c.diagnostics for c in report.configs)
    if report.message and not has_diagnostics:
        out.append(report.message)
    out += [f"forbidden: {hit}" for hit in report.forbid]
    if report.missing_kernels:
        out.append(f"kernels named in tuning.yaml but not defined in kernels.cu: {', '.join(report.missing_kernels)}")
    seen: set[tuple[str, int | None, str]] = set()
    for cfg in report.configs:
        if cfg.ok:
            continue
        if cfg.error and not cfg.diagnostics:
            out.append(f"config {cfg.config}: {cfg.error}")
        for d in cfg.diagnostics:
            key = (d.file, d.line, d.message)
            if key in seen or d.severity == "note":
                continue
            seen.add(key)
            where = f"{d.file}:{d.line}" if d.line else d.file
            code = _source_line(source, d.line) if d.file.endswith("kernels.cu") else ""
            out.append(
                f"{where}: {d.severity}: {d.message}" + (f"\n    {code}" if code else "") + f"   [config {cfg.config}]"
            )
            if len(seen) >= MAX_REPORTED:
                break
    resources = resource_lines(report)
    if resources:
        out.append("Resources of the configurations that compiled (ptxas):")
        out += resources
    return "\n".join(out)


async def check_compilation(deps: RunDeps, branch: BranchView) -> CheckOutcome:
    it = branch.it
    if not it.kernel.exists() or not it.spec.exists():
        missing = [n for n, p in (("kernels.cu", it.kernel), ("tuning.yaml", it.spec)) if not p.exists()]
        return CheckOutcome(False, f"compile check FAILED: {' and '.join(missing)} not written yet")
    try:
        source = read_model_file(it.kernel)  # a regular file within the kernel cap
    except OSError as exc:
        return CheckOutcome(False, f"compile check FAILED: kernels.cu: {describe_read_error(exc)}")
    hits = deps.problem.forbid_hits(source)
    if hits:
        return CheckOutcome(
            False, "compile check FAILED (rules.forbid):\n" + "\n".join(f"kernels.cu {h}" for h in hits)
        )
    try:
        report = await deps.tuner.check(
            deps.problem.directory, it.kernel, it.spec, sample=deps.defaults.check_sample, arch=deps.gpu.arch
        )
    except TunerError as exc:
        return CheckOutcome(False, f"compile check FAILED: {exc}")
    text = format_report(report, source)
    fingerprints: tuple[str | None, str | None] = (None, None)
    if report.ok:
        spec = read_model_file(it.spec)
        fingerprints = (source_fingerprint(source, spec), binary_fingerprint(spec, report))
        earlier = deps.tuned.find(list(fingerprints))
        if earlier is not None:
            text += (
                f"\nNOTE: these files are the kernel and tuning space of {earlier.where}, tuned already "
                f"({outcome_line(earlier.outcome)}); they would not be tuned again. Change something that matters."
            )
    return CheckOutcome(report.ok, text, report, fingerprints)
