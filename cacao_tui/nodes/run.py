"""Run: tune the iteration's kernel with ktt on a leased GPU (or compile-check it in a dry run).

A problem with ``cases:`` is tuned case by case (ktt does it, in declared order, each case
with its own search and budget): the budgets are the user's ``--timeout`` for every case,
else each case's ``duration_s``, else ``tuning.duration_s``, as in the original. The
watchdog covers their sum. A case that does not build, or finds nothing valid, stops the
iteration there; the message names the case.
"""

from __future__ import annotations

import os
from pathlib import Path

from cacao_tui.ktt_client import TuneRequest, TunerError
from cacao_tui.nodes.compile_check import check_options
from cacao_tui.nodes.context import BranchView, RunDeps
from cacao_tui.nodes.fingerprint import source_fingerprint
from cacao_tui.nodes.workspace import read_model_file
from cacao_tui.settings import tuner_watchdog_s
from cacao_tui.store.atomic import StateFileError, read_model_or_none
from cacao_tui.store.state import CaseOutcome, IterState, OutputStats, TuneOutcome
from ktt.protocol import TuneSummary

DRY_RUN_SAMPLE = 8
SETUP_PER_CASE_S = 60.0  # references, worker start, a case's build: outside its budget


def compile_workers(n_gpus: int) -> int | None:
    """With several GPUs, tunings run at once: share the cores between their compiler pools."""
    if n_gpus <= 1:
        return None
    return max(1, ((os.cpu_count() or 2) - 1) // n_gpus)


class EnvironmentFailure(Exception):
    """The machine cannot tune at all (no GPU, driver gone): the branch cannot go on."""


def case_budgets(deps: RunDeps) -> list[tuple[str, float]]:
    """(case, seconds) in declared order: ``--timeout`` for every case, else each case's own."""
    timeout = deps.settings.timeout_s
    return [(s.name, timeout or s.duration_s) for s in deps.problem.shapes]


def _relative(path: str | None, root: Path) -> str | None:
    if not path:
        return None
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return path


def outcome_of(summary: TuneSummary, summary_path: str, output: Path) -> TuneOutcome:
    best = summary.best
    suspect = bool(best and best.status == "suspect")
    return TuneOutcome(
        ran=True,
        summary_path=summary_path,
        # The primary case's best, as the original's best_time_us; with several cases the score
        # (null when a case failed) decides whether it may be the run's best.
        best_ms=best.time_ms if best else None,
        speedup=summary.speedup if best else None,
        score=summary.score,
        reference_ms=summary.reference_ms,
        reference_source=summary.reference_source,
        best_config=best.config if best else None,
        evaluated=summary.evaluated,
        valid=summary.valid,
        by_status=summary.by_status,
        space_size=summary.restricted_size or summary.space_size,
        confirmed=summary.confirmed_on_fresh_input,
        suspect=suspect,
        cases=[
            CaseOutcome(
                name=c.name,
                status=c.status,
                time_ms=c.time_ms,
                reference_ms=c.reference_ms,
                reference_source=c.reference_source,
                speedup=c.speedup,
                config=c.config,
                budget_s=c.budget_s,
                evaluated=c.evaluated,
                valid=c.valid,
                error=c.error,
                results_file=_relative(c.results_file, output),
            )
            for c in summary.cases
        ],
        message=summary.message,
        warnings=summary.warnings,
        reference_stats=[OutputStats.model_validate(x.model_dump()) for x in summary.reference_stats],
    )


def _checked_by_author(branch: BranchView) -> TuneOutcome | None:
    """A dry run's result from the authoring step's passing check of these very files (None:
    no such check, or the files changed since): nothing is compiled twice."""
    it = branch.it
    try:
        st = read_model_or_none(it.state, IterState)
        source = source_fingerprint(read_model_file(it.kernel), read_model_file(it.spec))
    except (StateFileError, OSError):
        return None
    author = st.author if st is not None else None
    if author is None or author.checked_fingerprint != source or author.compiled_configs is None:
        return None
    return TuneOutcome(
        ran=False,
        compiled=author.compiled_configs,
        space_size=author.checked_space,
        message=f"dry run: not run on a GPU; {author.compiled_configs}/{author.checked_configs} configurations "
        "compiled in the authoring step's check",
    )


async def run_tuning(deps: RunDeps, branch: BranchView) -> TuneOutcome:
    it = branch.it
    problem = deps.problem
    if deps.settings.dry_run:
        reused = _checked_by_author(branch)
        if reused is not None:
            return reused
        try:
            report = await deps.tuner.check(
                problem.directory, it.kernel, it.spec, sample=DRY_RUN_SAMPLE, arch=deps.gpu.arch,
                options=check_options(deps),
            )  # fmt: skip
        except TunerError as exc:
            return TuneOutcome(ran=False, message=f"dry run: compile check could not run: {exc}")
        n_ok = sum(1 for c in report.configs if c.ok)
        size = report.restricted_size if report.restricted_size is not None else report.space_size
        return TuneOutcome(
            ran=False,
            compiled=n_ok,
            space_size=size,
            message=f"dry run: not run on a GPU; {n_ok}/{len(report.configs)} sampled configurations compiled"
            + ("" if report.ok else " (check failed)"),
        )
    budgets = case_budgets(deps)
    total = sum(b for _, b in budgets)
    it.tune_dir.mkdir(parents=True, exist_ok=True)
    try:
        async with deps.devices.acquire() as device:
            if len(budgets) > 1:
                each = " + ".join(f"{name} {b:g}" for name, b in budgets)
                branch.reporter.log(f"tuning on GPU {device}, case by case: {each} s")
            else:
                branch.reporter.log(f"tuning on GPU {device} for up to {total:g} s")
            summary = await deps.tuner.tune(
                TuneRequest(
                    problem_dir=problem.directory,
                    kernel=it.kernel,
                    spec=it.spec,
                    out_dir=it.tune_dir,
                    device=device,
                    duration_s=deps.settings.timeout_s,
                    watchdog_s=tuner_watchdog_s(total + SETUP_PER_CASE_S * len(budgets)),
                    reference_time=deps.layout.reference_time,
                    seed=branch.iteration,
                    compile_workers=compile_workers(len(deps.gpu.indices)),
                    problem_budget=True,
                ),
                branch.reporter.tuning_progress,
            )
    except TunerError as exc:
        if exc.environment:
            raise EnvironmentFailure(str(exc)) from exc
        return TuneOutcome(ran=False, message=f"tuning failed: {exc}")
    for warning in summary.warnings:
        branch.reporter.log(f"reference: {warning}", "warning")
    if summary.message and len(summary.cases) > 1:
        branch.reporter.log(summary.message, "warning")
    return outcome_of(summary, str(it.tune_summary.relative_to(deps.layout.output)), deps.layout.output)
