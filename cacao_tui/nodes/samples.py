"""Best-of-K authoring (``--samples K``): K authoring attempts at once from the same prompt.

Each sample is the ordinary authoring tool loop in a directory of its own
(``iterN/samples/sK/``; record/replay node ``author`` for the first, ``author-sK`` for the
others), compile-checked inside its loop. Then, where a GPU is used, each sample that ended
is validated (``ktt validate``: both input sets) and the valid ones are tuned briefly (a
probe of ``Defaults.probe_s`` each); the fastest valid one becomes the iteration's files and
is tuned in full by the run step. In a dry run nothing runs on a GPU: the first sample that
ended is taken. Every sample's calls, tokens, cost, validity and probe time are recorded in
the iteration's ``AuthorOutcome.samples``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import shutil

from cacao_tui.ktt_client import TuneRequest, TunerError
from cacao_tui.llm import BudgetExceeded, LLMError
from cacao_tui.nodes.author import AuthorFailed, author
from cacao_tui.nodes.context import BranchView, RunDeps
from cacao_tui.nodes.fingerprint import source_fingerprint
from cacao_tui.nodes.validate import validate_files
from cacao_tui.nodes.workspace import forget_model_file, read_model_file
from cacao_tui.settings import tuner_watchdog_s
from cacao_tui.store.state import AuthorOutcome, SampleOutcome


def _sample_outcome(index: int, outcome: AuthorOutcome, error: str | None = None) -> SampleOutcome:
    return SampleOutcome(
        index=index,
        ok=outcome.ok and error is None,
        message=error or outcome.message,
        tool_calls=outcome.tool_calls,
        llm_calls=outcome.llm_calls,
        input_tokens=outcome.input_tokens,
        output_tokens=outcome.output_tokens,
        cost_usd=round(outcome.cost_usd, 6),
    )


async def _probe(deps: RunDeps, view: BranchView) -> float | None:
    """A short tuning of one sample: its best time, or None when nothing was valid."""
    it = view.it
    it.tune_dir.mkdir(parents=True, exist_ok=True)
    budget = deps.defaults.probe_s
    try:
        async with deps.devices.acquire() as device:
            summary = await deps.tuner.tune(
                TuneRequest(
                    problem_dir=deps.problem.directory, kernel=it.kernel, spec=it.spec, out_dir=it.tune_dir,
                    device=device, duration_s=budget, watchdog_s=tuner_watchdog_s(budget + 60.0),
                    reference_time=deps.layout.reference_time, seed=view.iteration, problem_budget=True,
                ),
                lambda _progress: None,
            )  # fmt: skip
    except TunerError as exc:
        view.reporter.log(f"sample {view.sample}: probe failed: {exc}", "warning")
        return None
    return summary.best.time_ms if summary.best is not None else None


async def author_samples(deps: RunDeps, branch: BranchView, plan: str, k: int) -> AuthorOutcome:
    """K authoring attempts; the chosen one's files end up in the iteration's directory."""
    views = [dataclasses.replace(branch, sample=i) for i in range(1, k + 1)]
    results = await asyncio.gather(*(author(deps, v, plan) for v in views), return_exceptions=True)
    samples: list[SampleOutcome] = []
    for v, result in zip(views, results, strict=True):
        if isinstance(result, AuthorFailed):
            samples.append(_sample_outcome(v.sample or 0, result.outcome, f"failed: {result}"))
        elif isinstance(result, LLMError) and not isinstance(result, BudgetExceeded):
            samples.append(_sample_outcome(v.sample or 0, AuthorOutcome(), f"failed: {result}"))  # its siblings go on
        elif isinstance(result, BaseException):
            raise result
        else:
            sample = _sample_outcome(v.sample or 0, result)
            sample.fingerprint = source_fingerprint(read_model_file(v.it.kernel), read_model_file(v.it.spec))
            samples.append(sample)
    ended = [(v, s) for v, s in zip(views, samples, strict=True) if s.ok]
    total = AuthorOutcome(samples=samples)
    for s in samples:
        total.tool_calls += s.tool_calls
        total.llm_calls += s.llm_calls
        total.input_tokens += s.input_tokens
        total.output_tokens += s.output_tokens
        total.cost_usd += s.cost_usd
    if not ended:
        raise AuthorFailed(f"none of the {k} authoring samples ended with files that pass the check", total)
    chosen = ended[0]
    if not deps.settings.dry_run:
        probed: list[tuple[float, BranchView, SampleOutcome]] = []
        times: dict[str, float | None] = {}
        for v, s in ended:
            _, text = await validate_files(deps, v, None)
            s.valid = text.startswith("validate: VALID")
            if not s.valid:
                continue
            if s.fingerprint in times:  # the same files as an earlier sample: the same probe
                s.probe_ms = times[s.fingerprint or ""]
            else:
                s.probe_ms = times[s.fingerprint or ""] = await _probe(deps, v)
            if s.probe_ms is not None:
                probed.append((s.probe_ms, v, s))
        if probed:
            _, view, sample = min(probed, key=lambda x: (x[0], x[1].sample or 0))
            chosen = (view, sample)
        else:
            valid = [(v, s) for v, s in ended if s.valid]
            chosen = valid[0] if valid else ended[0]
    view, sample = chosen
    sample.chosen = True
    for name in ("kernels.cu", "tuning.yaml"):
        shutil.copyfile(view.it.root / name, branch.it.root / name)
        forget_model_file(branch.it.root / name)
    picked = results[(view.sample or 1) - 1]
    assert isinstance(picked, AuthorOutcome)
    total.ok = True
    total.message = f"sample {view.sample} of {k}: {picked.message or ''}".strip()
    total.compile_checks = sum(r.compile_checks for r in results if isinstance(r, AuthorOutcome))
    total.compile_failures = sum(r.compile_failures for r in results if isinstance(r, AuthorOutcome))
    total.validations = sum(r.validations for r in results if isinstance(r, AuthorOutcome))
    total.binary_fingerprint = picked.binary_fingerprint
    how = f"probe {sample.probe_ms:.4g} ms" if sample.probe_ms is not None else "the first that ended"
    branch.reporter.log(f"{len(ended)} of {k} samples ended; sample {view.sample} chosen ({how})")
    branch.reporter.kernel_written(branch.it.kernel, branch.it.spec)
    return total

