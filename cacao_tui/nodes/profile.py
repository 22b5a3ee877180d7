"""Profile: Nsight Compute on the best configuration of the iteration."""

from __future__ import annotations

from cacao_tui.nodes.context import BranchView, RunDeps
from cacao_tui.store.state import ProfileOutcome, TuneOutcome
from ktt.protocol import KernelProfile, ProfileReport

HEADLINE_SECTIONS = ("speed_of_light", "occupancy")
MAX_HEADLINE = 8


def _headline(kernels: list[KernelProfile]) -> dict[str, str]:
    out: dict[str, str] = {}
    for k in kernels:
        prefix = f"{k.kernel}: " if len(kernels) > 1 else ""
        if k.duration_ms is not None:
            out[f"{prefix}duration"] = f"{k.duration_ms:.4g} ms"
        for m in k.metrics:
            if m.section in HEADLINE_SECTIONS and len(out) < MAX_HEADLINE:
                value = f"{m.value:.4g}" if isinstance(m.value, float) else str(m.value)
                out[f"{prefix}{m.label}"] = f"{value} {m.unit}".strip()
    return out


async def profile_best(deps: RunDeps, branch: BranchView, run: TuneOutcome) -> ProfileOutcome:
    if deps.settings.dry_run:
        return ProfileOutcome(ran=False, message="dry run: not profiled")
    if not run.ran or run.best_ms is None:
        return ProfileOutcome(ran=False, message="nothing to profile: no valid configuration")
    it = branch.it
    async with deps.devices.acquire() as device:
        branch.reporter.log(f"profiling the best configuration with Nsight Compute on GPU {device}")
        report = await deps.tuner.profile(
            deps.problem.directory, it.kernel, it.spec, it.tune_summary, it.root, device=device
        )
    if not report.ok:
        return ProfileOutcome(ran=False, message=f"profile failed ({report.error_kind}): {report.error}")
    roofline = (
        report.kernels[0].roofline
        if len(report.kernels) == 1
        else ", ".join(f"{k.kernel}: {k.roofline}" for k in report.kernels)
    )
    return ProfileOutcome(
        ran=True,
        path=str(it.profile.relative_to(deps.layout.output)),
        roofline=roofline,
        headline=_headline(report.kernels),
    )


def profile_text(deps: RunDeps, branch: BranchView, outcome: ProfileOutcome | None) -> str:
    """The metrics as the propose step reads them."""
    if outcome is None or not outcome.ran:
        return outcome.message if outcome and outcome.message else "no profile"
    path = branch.it.profile
    if not path.exists():
        return f"roofline: {outcome.roofline}; " + ", ".join(f"{k} {v}" for k, v in outcome.headline.items())
    report = ProfileReport.model_validate_json(path.read_text(encoding="utf-8"))
    lines = []
    for k in report.kernels:
        lines.append(f"kernel {k.kernel} (launch {k.launch_index}): {k.roofline}")
        for m in k.metrics:
            value = f"{m.value:.4g}" if isinstance(m.value, float) else str(m.value)
            lines.append(f"  [{m.section}] {m.label}: {value} {m.unit}".rstrip())
    return "\n".join(lines)
