"""check_compilation: forbid rules first, then NVRTC (through ktt) over a sample of configurations."""

from __future__ import annotations

from dataclasses import dataclass

from cacao_tui.ktt_client import TunerError
from cacao_tui.nodes.context import BranchView, RunDeps
from cacao_tui.nodes.workspace import read_model_file
from ktt.capped_read import describe_read_error
from ktt.protocol import CheckReport

MAX_REPORTED = 12


@dataclass
class CheckOutcome:
    ok: bool
    text: str  # what the model reads
    report: CheckReport | None = None


def _source_line(source: str, line: int | None) -> str:
    if not line:
        return ""
    lines = source.splitlines()
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""


def format_report(report: CheckReport, source: str) -> str:
    if report.ok:
        n_ok = sum(1 for c in report.configs if c.ok)
        size = report.restricted_size if report.restricted_size is not None else report.space_size
        return (
            f"compile check passed: {n_ok}/{len(report.configs)} sampled configurations compiled "
            f"(space: {size} configurations after restrictions)."
        )
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
    return CheckOutcome(report.ok, format_report(report, source), report)
