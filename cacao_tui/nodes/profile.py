"""Profile: Nsight Compute on the best configuration of the iteration."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from cacao_tui.nodes.context import BranchView, RunDeps
from cacao_tui.store.state import ProfileOutcome, TuneOutcome
from ktt.capped_read import read_bytes_capped
from ktt.diagnosis import diagnosis_lines
from ktt.protocol import KernelProfile, ProfileReport

HEADLINE_SECTIONS = ("speed_of_light", "occupancy")
MAX_HEADLINE = 8
MAX_DIAGNOSED = 4  # kernels of a pipeline diagnosed in a prompt
MAX_FINDINGS_SHOWN = 3
MAX_PROFILE_BYTES = 8 * 1024 * 1024


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
        diagnosis=diagnosis_text(report.kernels) or None,
    )


def diagnosis_text(kernels: list[KernelProfile]) -> str:
    """The diagnosis of every profiled kernel (the two leading bottlenecks, stalls, occupancy),
    its top rule findings and source hotspots."""
    several = len(kernels) > 1
    lines: list[str] = []
    for k in kernels[:MAX_DIAGNOSED]:
        if k.diagnosis is not None:
            lines += diagnosis_lines(k.diagnosis, k.kernel if several else None)
        for f in k.findings[:MAX_FINDINGS_SHOWN]:
            est = f" (est. {f.speedup_pct:.0f}% faster)" if f.speedup_pct else ""
            lines.append(f"{k.kernel + ': ' if several else ''}Nsight Compute {f.rule}{est}: {f.text}")
        if k.hotspots:
            spots = "; ".join(f"line {h.line} {h.share:.0%} `{h.source}`" for h in k.hotspots[:3])
            lines.append(f"{k.kernel + ': ' if several else ''}stall hotspots (kernels.cu): {spots}")
    return "\n".join(lines)


def _read_report(path: Path) -> ProfileReport | None:
    try:
        return ProfileReport.model_validate_json(read_bytes_capped(path, MAX_PROFILE_BYTES, follow_links=False))
    except (OSError, ValueError, ValidationError):
        return None


def _change(value: float | str | None, before: float | str | None) -> str:
    if not isinstance(value, int | float) or not isinstance(before, int | float):
        return "" if before is None or before == value else f"; was {before}"
    if before == value:
        return "; unchanged"
    if before == 0:
        return f"; was {before:.4g}"
    return f"; was {before:.4g}, {(value - before) / abs(before):+.0%}"


def profile_text(
    deps: RunDeps,
    branch: BranchView,
    outcome: ProfileOutcome | None,
    earlier: tuple[int, Path] | None = None,
    tuned_ms: float | None = None,
) -> str:
    """The metrics as the propose step reads them, each with its change since ``earlier``
    (the iteration number and profile of the last profiled iteration before this one), and how
    the tuner's time of the profiled configuration (``tuned_ms``) compares with the kernels'
    own durations."""
    if outcome is None or not outcome.ran:
        return outcome.message if outcome and outcome.message else "no profile"
    report = _read_report(branch.it.profile)
    diagnosis = f"Diagnosis:\n{outcome.diagnosis}\n" if outcome.diagnosis else ""
    if report is None:
        headline = ", ".join(f"{k} {v}" for k, v in outcome.headline.items())
        return diagnosis + f"roofline: {outcome.roofline}; {headline}"
    before = _read_report(earlier[1]) if earlier else None
    # A kernel launched several times (the passes of a repeat) is compared launch by launch:
    # its n-th launch now against its n-th launch then.
    old: dict[tuple[str, int, str], float | str | None] = {}
    old_class: dict[tuple[str, int], str] = {}
    if before is not None:
        for k, nth in _numbered(before.kernels):
            old_class[(k.kernel, nth)] = k.roofline
            for m in k.metrics:
                old[(k.kernel, nth, m.name)] = m.value
    against = " (no earlier profile):"
    if before is not None and earlier:
        against = f" (changes against iteration {earlier[0]}):"
    lines = [diagnosis + "Metrics" + against]
    for k, nth in _numbered(report.kernels):
        was = old_class.get((k.kernel, nth))
        change = f" (was {was})" if was is not None and was != k.roofline else ""
        lines.append(f"kernel {k.kernel} (launch {k.launch_index}): {k.roofline}{change}")
        for m in k.metrics:
            value = f"{m.value:.4g}" if isinstance(m.value, float) else str(m.value)
            key = (k.kernel, nth, m.name)
            delta = _change(m.value, old[key]) if key in old else ""
            lines.append(f"  [{m.section}] {m.label}: {value} {m.unit}".rstrip() + delta)
    timing = timing_line(tuned_ms, [k.duration_ms for k in report.kernels])
    traffic = dram_line(report.kernels, deps.device.copy_bandwidth_gbs if deps.device is not None else None)
    return "\n".join(lines + [line for line in (timing, traffic) if line])


def dram_line(kernels: list[KernelProfile], copy_gbs: float | None) -> str:
    """The kernels' DRAM traffic against the copy bandwidth measured on this GPU: the scale the
    physical floor uses (Nsight Compute's "% of peak" is of the theoretical peak)."""
    moved = 0.0
    seconds = 0.0
    for k in kernels:
        values = {m.name: m.value for m in k.metrics}
        read, written = values.get("dram__bytes_read.sum"), values.get("dram__bytes_write.sum")
        if not isinstance(read, int | float) or not isinstance(written, int | float) or not k.duration_ms:
            return ""
        moved += read + written
        seconds += k.duration_ms / 1e3
    if not copy_gbs or seconds <= 0 or moved <= 0:
        return ""
    gbs = moved / seconds / 1e9
    return (
        f"DRAM traffic: {moved / 1e6:,.1f} MB in the kernels' {seconds * 1e3:.4g} ms, {gbs:,.0f} GB/s: "
        f"{gbs / copy_gbs:.0%} of the copy bandwidth measured on this GPU ({copy_gbs:,.0f} GB/s, the "
        "physical floor's scale; Nsight Compute's \"% of peak\" figures are of the theoretical peak)."
    )


def _numbered(kernels: list[KernelProfile]) -> list[tuple[KernelProfile, int]]:
    """Each profiled launch with its occurrence number among the launches of the same kernel."""
    seen: dict[str, int] = {}
    out = []
    for k in kernels:
        seen[k.kernel] = seen.get(k.kernel, 0) + 1
        out.append((k, seen[k.kernel]))
    return out


def timing_line(tuned_ms: float | None, durations: list[float | None]) -> str:
    """How the tuner's time compares with the kernels' own durations ('' when either is unknown)."""
    known = [d for d in durations if d is not None]
    if tuned_ms is None or not known or len(known) != len(durations):
        return ""
    kernels_ms = sum(known)
    gap_us = (tuned_ms - kernels_ms) * 1000
    text = (
        f"Timing: the tuner's {tuned_ms:.4g} ms is CUDA events around the whole launch sequence (the "
        "zeroing of scratch buffers, every launch and the gaps between them; the median of its "
        f"repeats); Nsight Compute's durations of the {len(known)} profiled launch{'es' if len(known) > 1 else ''} "
        f"add up to {kernels_ms:.4g} ms"
    )
    if gap_us > 0:
        text += (
            f". The {gap_us:.1f} us between them ({gap_us / 10 / tuned_ms:.0f} % of the time) is the "
            "launch sequence's fixed cost, not the kernels' work: fewer launches or less zeroing "
            "shrink it, a faster kernel body does not"
        )
    return text + "."
