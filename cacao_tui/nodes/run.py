"""Run: tune the iteration's kernel with ktt on a leased GPU (or compile-check it in a dry run)."""

from __future__ import annotations

import os

from cacao_tui.ktt_client import TuneRequest, TunerError
from cacao_tui.nodes.context import BranchView, RunDeps
from cacao_tui.settings import tuner_watchdog_s
from cacao_tui.store.state import CaseOutcome, TuneOutcome

DRY_RUN_SAMPLE = 8


def compile_workers(n_gpus: int) -> int | None:
    """With several GPUs, tunings run at once: share the cores between their compiler pools."""
    if n_gpus <= 1:
        return None
    return max(1, ((os.cpu_count() or 2) - 1) // n_gpus)


class EnvironmentFailure(Exception):
    """The machine cannot tune at all (no GPU, driver gone): the branch cannot go on."""


async def run_tuning(deps: RunDeps, branch: BranchView) -> TuneOutcome:
    it = branch.it
    problem = deps.problem
    if deps.settings.dry_run:
        try:
            report = await deps.tuner.check(
                problem.directory, it.kernel, it.spec, sample=DRY_RUN_SAMPLE, arch=deps.gpu.arch
            )
        except TunerError as exc:
            return TuneOutcome(ran=False, message=f"dry run: compile check could not run: {exc}")
        n_ok = sum(1 for c in report.configs if c.ok)
        size = report.restricted_size if report.restricted_size is not None else report.space_size
        return TuneOutcome(
            ran=False,
            space_size=size,
            message=f"dry run: not run on a GPU; {n_ok}/{len(report.configs)} sampled configurations compiled"
            + ("" if report.ok else " (check failed)"),
        )
    budget = deps.settings.timeout_s or problem.primary.duration_s
    it.tune_dir.mkdir(parents=True, exist_ok=True)
    try:
        async with deps.devices.acquire() as device:
            branch.reporter.log(f"tuning on GPU {device} for up to {budget:g} s")
            summary = await deps.tuner.tune(
                TuneRequest(
                    problem_dir=problem.directory,
                    kernel=it.kernel,
                    spec=it.spec,
                    out_dir=it.tune_dir,
                    device=device,
                    duration_s=budget,
                    watchdog_s=tuner_watchdog_s(budget + 60.0 * len(problem.shapes)),
                    reference_time=deps.layout.reference_time,
                    seed=branch.iteration,
                    compile_workers=compile_workers(len(deps.gpu.indices)),
                ),
                branch.reporter.tuning_progress,
            )
    except TunerError as exc:
        if exc.environment:
            raise EnvironmentFailure(str(exc)) from exc
        return TuneOutcome(ran=False, message=f"tuning failed: {exc}")
    best = summary.best
    suspect = bool(best and best.status == "suspect")
    return TuneOutcome(
        ran=True,
        summary_path=str(it.tune_summary.relative_to(deps.layout.output)),
        best_ms=best.time_ms if best and summary.ok else None,
        speedup=summary.speedup if summary.ok else None,
        score=summary.score,
        reference_ms=summary.reference_ms,
        best_config=best.config if best else None,
        evaluated=summary.evaluated,
        valid=summary.valid,
        by_status=summary.by_status,
        space_size=summary.restricted_size or summary.space_size,
        confirmed=summary.confirmed_on_fresh_input,
        suspect=suspect,
        cases=[
            CaseOutcome(name=c.name, status=c.status, time_ms=c.time_ms, reference_ms=c.reference_ms, speedup=c.speedup)
            for c in summary.cases
        ],
        message=summary.message,
    )
