"""The results of a run: final_results.json, or the same summary rebuilt from the branch files.

``rebuild_final_results`` reads only what the workers wrote (branch.json and each
iterN/state.json), so it works for a run that finished, crashed or is still going; the
engine's merge step and ``cacao --best`` both use it. Nothing here writes a file.

Iterations a revert left behind (``BranchManifest.superseded``) stay in the results, marked,
and stay eligible as the branch's and the run's best, as they do in the engine (a revert
leaves ``BranchManifest.best`` as it is, and a later iteration becomes the best only by
beating it): a revert changes where the branch goes on from, not what was measured. A
branch's ``iterations`` counts the decided iterations of its current line, as ``max_iter``
does; the superseded ones are listed beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from cacao_tui.llm.usage import ILLUSTRATIVE
from cacao_tui.store.atomic import StateFileError, read_model_or_none, write_model
from cacao_tui.store.layout import RunLayout, is_branch_name
from cacao_tui.store.original_run import FROM_ORIGINAL, collect_original_results, is_original_output
from cacao_tui.store.phases import WHAT, PhaseState, read_phase_state, waiting_line
from cacao_tui.store.run_lock import run_is_live
from cacao_tui.store.state import (
    INTERRUPTED,
    TERMINAL_BRANCH,
    BestResult,
    BranchManifest,
    BranchSummary,
    CaseOutcome,
    Context,
    FinalResults,
    IterationPoint,
    IterState,
    MasterState,
    OriginalBranchEntry,
)
from ktt.reference_times import NO_BASELINE, SPREAD_WARN, ReferenceTime, ReferenceTimeError, read_reference_times

M = TypeVar("M", bound=BaseModel)
DRY_RUN_BEST = "a dry run times nothing (its kernels were compile-checked); run without --dry-run on a GPU to measure"
FROM_FILE = "final_results.json"
FROM_BRANCHES = "the branch files (rebuilt: no readable final_results.json)"
DEFAULT_SHAPE = "default"  # the one shape of a problem without cases (and of every run of the original)


@dataclass
class LoadedResults:
    """What ``--best`` shows, and where it came from."""

    results: FinalResults | None
    source: str  # FROM_FILE, FROM_BRANCHES, or "" when there is nothing
    notes: list[str] = field(default_factory=list)  # files that could not be read
    phase: PhaseState | None = None  # a split run's last phase (output/phase.json)
    live: bool = False  # a run holds the directory now (its results are still coming in)

    @property
    def ended(self) -> bool:
        """The run's process is gone: what its files still call running was cut short."""
        return self.source == FROM_FILE or not self.live

    def shown_status(self, status: str, branch: str | None = None) -> str:
        """A branch's status as the results say it. A branch the run's end caught on its way (pending,
        running or paused in final_results.json, written when the run or its part ends; or in the
        branch files of a run whose process died, SIGKILLed, with no final_results.json) reads
        ``interrupted``: its files say running so that --resume goes on with it. In a split run
        (--phase) one the last phase left for the other reads ``waits for the GPU`` (or the model)."""
        if status in TERMINAL_BRANCH:
            return status
        waits = self.phase.waiting.get(branch) if self.phase is not None and branch is not None else None
        if waits is not None:
            return f"waits for {WHAT[waits]}"
        return INTERRUPTED if self.ended else status

    def shown_iteration_status(self, status: str) -> str:
        """An iteration's status as the results say it: one still on its way when the run ended reads
        ``interrupted`` (decided, failed and superseded ones as they are)."""
        return INTERRUPTED if self.ended and status not in ("decided", "failed", "superseded") else status


def _read(path: Path, model: type[M], notes: list[str]) -> M | None:
    try:
        return read_model_or_none(path, model)
    except StateFileError as exc:
        notes.append(f"skipped {exc}")
        return None


def every_case_valid(cases: list[CaseOutcome]) -> bool:
    """Every case has a valid, timed result (its speedup may still be null: a case with no baseline)."""
    return bool(cases) and all(c.status == "ok" and c.time_ms for c in cases)


def best_candidate(state: IterState, require_score: bool) -> BestResult | None:
    """The iteration's tuned result, when it may be reported as a best: tuned, a finite time,
    not suspect, and with ``cases`` valid on every case (a score, or none only because a case has
    no baseline: then it ranks by time below every scored one). The worker and the rebuild both
    use this rule."""
    r = state.run
    if r is None or not r.ran or r.best_ms is None or r.suspect:
        return None
    if not math.isfinite(r.best_ms) or r.best_ms <= 0:
        return None
    if require_score and r.score is None and not every_case_valid(r.cases):
        return None  # with cases, a kernel that failed a case has no score and is not eligible
    return BestResult(
        branch=state.branch,
        iteration=state.index,
        time_ms=r.best_ms,
        speedup=r.speedup,
        score=r.score,
        config=r.best_config or {},
        kernel_path=state.kernel_path or "",
        spec_path=state.spec_path,
        cases=r.cases,
    )


def _better(a: BestResult | None, b: BestResult | None) -> BestResult | None:
    if a is None:
        return b
    if b is None:
        return a
    return b if b.rank() > a.rank() else a


def _tree_order(manifests: list[BranchManifest]) -> list[BranchManifest]:
    """Parents before their children, siblings in creation order."""
    by_parent: dict[str | None, list[BranchManifest]] = {}
    names = {m.name for m in manifests}
    for m in manifests:
        parent = m.parent if m.parent in names else None
        by_parent.setdefault(parent, []).append(m)
    ordered: list[BranchManifest] = []

    def visit(parent: str | None) -> None:
        for m in sorted(by_parent.get(parent, []), key=lambda x: (x.created_at, x.name)):
            ordered.append(m)
            visit(m.name)

    visit(None)
    return ordered


def _reference_time(layout: RunLayout, primary: str, notes: list[str]) -> ReferenceTime | None:
    """The primary shape's entry of output/reference_time.json (either form), read leniently."""
    try:
        return read_reference_times(layout.reference_time, primary).get(primary)
    except ReferenceTimeError as exc:
        notes.append(f"skipped {exc}")
        return None


def _reference_time_file(layout: RunLayout, primary: str, notes: list[str]) -> tuple[float | None, str | None]:
    """(ms, source) of the primary shape from output/reference_time.json (either form), read leniently."""
    ref = _reference_time(layout, primary, notes)
    if ref is None:
        return None, None
    return ref.ms, ref.source if ref.ms is not None or ref.no_baseline else None


def reference_calls(r: FinalResults) -> ReferenceTime | None:
    """The results' reference as reference_time.json measured it (its timed calls), where recorded."""
    if r.reference_ms is None or not r.reference_samples:
        return None
    return ReferenceTime(
        r.reference_ms, "measured", samples=r.reference_samples, min_ms=r.reference_min_ms, max_ms=r.reference_max_ms
    )


def reference_spread_warning(r: FinalResults) -> str | None:
    """A warning when the reference's timed calls spread over SPREAD_WARN of their median."""
    ref = reference_calls(r)
    spread = ref.spread if ref is not None else None
    if ref is None or spread is None or spread <= SPREAD_WARN:
        return None
    return (
        f"the reference's {ref.samples} timed calls spread {spread:.0%} (over {SPREAD_WARN:.0%}): every speedup "
        "shares this denominator; remove output/reference_time.json's value to time it again on a quiet machine"
    )


def _timeline(states: list[IterState], require_score: bool, superseded: set[int]) -> list[IterationPoint]:
    """Each iteration's tuned result and the decision after it; ``new_best`` where the branch improved
    (superseded iterations included, as they are for the best)."""
    points: list[IterationPoint] = []
    best: BestResult | None = None
    for st in states:
        r = st.run
        ran = r is not None and r.ran and r.best_ms is not None
        candidate = best_candidate(st, require_score)
        improved = candidate is not None and _better(best, candidate) is candidate and candidate is not best
        best = _better(best, candidate)
        points.append(
            IterationPoint(
                iteration=st.index,
                status=st.status,
                time_ms=r.best_ms if ran and r is not None else None,
                speedup=r.speedup if ran and r is not None else None,
                score=r.score if ran and r is not None else None,
                action=st.decision.action if st.decision else None,
                new_best=improved,
                superseded=st.index in superseded,
            )
        )
    return points


def _original_status(s: BranchSummary) -> str:
    if s.best_ms is not None:
        return "success"
    return "failed" if s.status in TERMINAL_BRANCH else "running"


def with_original_keys(results: FinalResults, layout: RunLayout) -> FinalResults:
    """The original CACAO's final_results.json keys, derived from ours (see FinalResults)."""
    scored = bool(results.cases)
    best = results.best

    def headline(speedup: float | None, score: float | None) -> float | None:
        return score if scored else speedup

    return results.model_copy(
        update={
            "best_branch": best.branch if best else None,
            "best_config": dict(best.config) if best else None,
            "best_time_us": best.time_ms * 1e3 if best else None,
            "speedup": headline(best.speedup, best.score) if best else None,
            "reference_time_us": results.reference_ms * 1e3 if results.reference_ms is not None else None,
            "total_branches": len(results.branches),
            "all_branches": [
                OriginalBranchEntry(
                    name=s.name,
                    path=str(layout.branch(s.name).root) if is_branch_name(s.name) else "",
                    status=_original_status(s),
                    best_time_us=s.best_ms * 1e3 if s.best_ms is not None else None,
                    speedup=headline(s.speedup, s.score),
                    iterations=s.iterations,
                )
                for s in results.branches
            ],
        }
    )


def collect_final_results(layout: RunLayout) -> tuple[FinalResults, list[str]]:
    """The summary of the run in ``layout.output`` from its branch files, and notes on unreadable files."""
    notes: list[str] = []
    context = _read(layout.context, Context, notes)
    master = _read(layout.master, MasterState, notes)
    require_score = bool(context and context.cases)
    read = (_read(layout.branch(name).manifest, BranchManifest, notes) for name in layout.branch_names())
    manifests = [m for m in read if m is not None]
    summaries: list[BranchSummary] = []
    best: BestResult | None = None
    reference_ms: float | None = None
    reference_source: str | None = None
    for m in _tree_order(manifests):
        branch = layout.branch(m.name)
        branch_best: BestResult | None = None
        states = [st for i in branch.iteration_indices() if (st := _read(branch.iteration(i).state, IterState, notes))]
        superseded = set(m.superseded)
        decided = sum(st.status == "decided" and st.index not in superseded for st in states)
        for state in states:
            if state.run is not None and state.run.reference_ms is not None and reference_ms is None:
                reference_ms = state.run.reference_ms
                reference_source = state.run.reference_source
            elif state.run is not None and state.run.reference_source == NO_BASELINE and reference_source is None:
                reference_source = NO_BASELINE
            branch_best = _better(branch_best, best_candidate(state, require_score))
        if m.best is not None and (not require_score or m.best.score is not None or every_case_valid(m.best.cases)):
            branch_best = _better(branch_best, m.best)  # the worker's own record, if a state file is gone
        if branch_best is not None:
            branch_best = branch_best.model_copy(update={"superseded": branch_best.iteration in superseded})
        best = _better(best, branch_best)
        summaries.append(
            BranchSummary(
                name=m.name,
                title=m.title,
                parent=m.parent,
                depth=m.depth,
                status=m.status,
                iterations=max(m.iterations_done, decided),
                best_ms=branch_best.time_ms if branch_best else None,
                speedup=branch_best.speedup if branch_best else None,
                score=branch_best.score if branch_best else None,
                best_iteration=branch_best.iteration if branch_best else None,
                stop_reason=m.stop_reason or m.error,
                timeline=_timeline(states, require_score, superseded),
                superseded=sorted(superseded),
            )
        )
    primary = context.cases[0] if context and context.cases else DEFAULT_SHAPE
    file_ref = _reference_time(layout, primary, notes)
    file_ms = file_ref.ms if file_ref is not None else None
    known = file_ref is not None and (file_ref.ms is not None or file_ref.no_baseline)
    file_source = file_ref.source if file_ref is not None and known else None
    finished = master is None or master.phase == "finished"
    complete = bool(summaries) and finished and all(s.status in TERMINAL_BRANCH for s in summaries)
    results = FinalResults(
        problem_name=context.problem_name if context else layout.problem_dir.name,
        complete=complete,
        rebuilt=True,
        dry_run=bool(context and context.settings.dry_run),
        reference_ms=reference_ms if reference_ms is not None else file_ms,
        reference_source=(reference_source or file_source) if reference_ms is not None else (
            reference_source if reference_source == NO_BASELINE else file_source
        ),
        cases=list(context.cases) if context else [],
        best=best,
        branches=summaries,
    )
    used = results.reference_ms
    if file_ref is not None and file_ref.samples and used is not None and math.isclose(used, file_ref.ms or 0.0):
        results.reference_samples = file_ref.samples  # the value used is the file's measured median
        results.reference_min_ms, results.reference_max_ms = file_ref.min_ms, file_ref.max_ms
    return with_original_keys(results, layout), notes


def rebuild_final_results(layout: RunLayout) -> FinalResults:
    """final_results.json's content rebuilt from the branch files (``rebuilt=True``); writes nothing.

    The best result follows the worker's rule: a tuned, non-suspect time, and with ``cases``
    a geometric-mean score; ranked by ``BestResult.rank`` (score first, then time).
    ``complete`` is True only when the master finished and every branch is in a final state.
    Token counts and cost are not in the branch files; the engine's merge adds them.
    """
    return collect_final_results(layout)[0]


def refresh_final_results(layout: RunLayout) -> FinalResults | None:
    """Rewrite a finished run's final_results.json from the branches it has now (a branch was
    deleted between runs), keeping what the branch files do not hold: tokens, cost, dry_run and
    whether the run was complete. None, and nothing written, when there is no such file."""
    saved = _read(layout.final_results, FinalResults, [])
    if saved is None:
        return None
    fresh = rebuild_final_results(layout).model_copy(
        update={"complete": saved.complete, "rebuilt": saved.rebuilt, "dry_run": saved.dry_run,
                "tokens": saved.tokens, "cost_usd": saved.cost_usd, "run_status": saved.run_status,
                "run_message": saved.run_message, "illustrative_usage": saved.illustrative_usage}
    )  # fmt: skip
    write_model(layout.final_results, fresh)
    return fresh


def load_results(layout: RunLayout) -> LoadedResults:
    """final_results.json when it is there and readable, else the rebuild; ``results`` None if never run.
    An output/ the original CACAO wrote is read in its own layout (store/original_run.py)."""
    notes: list[str] = []
    if is_original_output(layout.output):
        ref_ms, ref_source = _reference_time_file(layout, DEFAULT_SHAPE, notes)
        results, more = collect_original_results(layout.output, layout.problem_dir.name, ref_ms, ref_source)
        return LoadedResults(results, FROM_ORIGINAL, notes + more)
    saved = _read(layout.final_results, FinalResults, notes)
    if saved is not None:
        return LoadedResults(with_original_keys(saved, layout), FROM_FILE, notes, read_phase_state(layout))
    if not layout.branch_names() and not layout.context.exists():
        return LoadedResults(None, "", notes)
    results, more = collect_final_results(layout)
    return LoadedResults(results, FROM_BRANCHES, notes + more, live=run_is_live(layout.problem_dir))


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g} ms"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}x"


def verdict_text(r: FinalResults) -> str | None:
    """The run's verdict as its last line said it ('failed: every step was refused by the model',
    'ok'), or None when the results do not hold one (rebuilt, or an older version's file)."""
    if not r.run_status:
        return None
    status = r.run_status.replace("_", " ")
    return f"{status}: {r.run_message}" if r.run_message else status


def reference_text(ms: float | None, source: str | None) -> str:
    """'1.773 ms (seeded)', 'no baseline' (a null in reference_time.json), or '-'."""
    if ms is None and source == NO_BASELINE:
        return NO_BASELINE
    return _ms(ms) + (f" ({source})" if source and ms is not None else "")


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def _kernel_display(layout: RunLayout, path: str) -> str:
    p = Path(path)
    full = p if p.is_absolute() else layout.output / p
    try:
        return str(full.relative_to(layout.problem_dir))
    except ValueError:
        return str(full)


def render_results(loaded: LoadedResults, layout: RunLayout, *, verdict: bool = True) -> str:
    """The ``--best`` text: the run's verdict, the best result, then one row per branch (the best one
    starred). ``verdict=False`` leaves the verdict out (the headless run prints it as its last line)."""
    r = loaded.results
    if r is None:
        return f"{layout.problem_dir.name}: no results (output/ holds no run)"
    if r.complete:
        state = "complete run"
    elif loaded.phase is not None and loaded.phase.next_phase is not None:
        state = f"a split run: {waiting_line(loaded.phase, layout.problem_dir)}"
    elif loaded.ended and loaded.source == FROM_BRANCHES:
        state = "interrupted: no process runs it; --resume continues it"
    else:
        state = "the run has not finished"
    if r.dry_run:
        state += ", dry run: kernels were compile-checked, nothing was timed"
    lines = [f"{r.problem_name}: results from {loaded.source} ({state})"]
    said = verdict_text(r) if verdict else None
    if said is not None:
        lines.append(f"run        {said}")
    ref = reference_text(r.reference_ms, r.reference_source)
    if r.best is not None:
        b = r.best
        over = f", {b.speedup:.3g}x over the reference" if b.speedup is not None else ""
        score = f", score {b.score:.3g} (geometric mean over shapes)" if b.score is not None and r.cases else ""
        if b.score is None and r.cases and any(c.reference_source == NO_BASELINE for c in b.cases):
            score = ", no score (a case has no baseline)"
        lines.append(f"best       {b.branch} iteration {b.iteration}: {_ms(b.time_ms)}{over}{score}")
        if b.superseded:
            lines.append(f"           (iteration {b.iteration} was superseded by a revert; still the fastest measured)")
        lines.append(f"kernel     {_kernel_display(layout, b.kernel_path)}")
        if b.config:
            lines.append("config     " + ", ".join(f"{k}={v}" for k, v in b.config.items()))
        if r.cases and b.cases:
            lines += case_table(b.cases)
    elif r.dry_run:
        lines.append(f"best       none: {DRY_RUN_BEST}")
    elif r.cases:
        lines.append("best       none: no kernel has a valid result on every case (the score needs them all)")
    else:
        lines.append("best       none: no kernel was validated and timed")
    calls = reference_calls(r)
    lines.append(f"reference  {ref}" + (f", {calls.samples_text()}" if calls is not None else ""))
    spread = reference_spread_warning(r)
    if spread is not None:
        lines.append(f"           warning: {spread}")
    if r.tokens or r.cost_usd is not None:
        tokens = ", ".join(f"{k} {v:,}" for k, v in r.tokens.items()) or "-"
        cost = f"${r.cost_usd:.2f}" if r.cost_usd is not None else "-"
        spent = r.illustrative_usage and (r.cost_usd or any(r.tokens.values()))
        mark = f" ({ILLUSTRATIVE}: a replay's recorded figures, nothing was spent)" if spent else ""
        lines.append(f"llm        tokens {tokens}; cost {cost}{mark}")
    if r.branches:
        header = ("", "branch", "status", "iters", "best", "speedup", "score", "at", "note")
        best_name = r.best.branch if r.best else None
        rows: list[tuple[str, ...]] = [header]
        for s in r.branches:
            rows.append(
                (
                    "*" if s.name == best_name else "",
                    "  " * s.depth + s.name,
                    loaded.shown_status(s.status, s.name),
                    str(s.iterations),
                    _ms(s.best_ms),
                    _x(s.speedup),
                    "-" if s.score is None else f"{s.score:.3g}",
                    "-" if s.best_iteration is None else f"iter{s.best_iteration}",
                    _branch_note(s),
                )
            )
        if not r.cases:  # without cases the score is the speedup: one column says it
            rows = [row[:6] + row[7:] for row in rows]
        lines.append("")
        lines += _table(rows)
        lines += iteration_timeline(r)
    else:
        lines.append("no branches yet")
    lines += [f"note: {n}" for n in loaded.notes]
    return "\n".join(lines)


def _branch_note(s: BranchSummary) -> str:
    note = (s.stop_reason or "").replace("\n", " ")[:60]
    if s.superseded:
        gone = f"superseded {','.join(map(str, s.superseded))}"
        note = f"{gone}; {note}" if note else gone
    return note


def case_table(cases: list[CaseOutcome]) -> list[str]:
    """The best kernel's per-case results: each case's own best over its own reference."""
    rows: list[tuple[str, ...]] = [("  case", "status", "best", "reference", "speedup", "budget", "valid", "config")]
    for c in cases:
        ref = reference_text(c.reference_ms, c.reference_source)
        rows.append(
            (
                f"  {c.name}",
                c.status,
                _ms(c.time_ms),
                ref,
                _x(c.speedup),
                "-" if c.budget_s is None else f"{c.budget_s:g} s",
                f"{c.valid}/{c.evaluated}",
                ", ".join(f"{k}={v}" for k, v in (c.config or {}).items()) or "-",
            )
        )
    return ["cases", *_table(rows)]


TIMELINE_BAR = 32


def iteration_timeline(r: FinalResults) -> list[str]:
    """Every branch's iterations, as the original's ``--best`` prints them: the time, a bar scaled so
    the run's best time is full, the decision taken after it, a star where the branch improved."""
    times = [p.time_ms for b in r.branches for p in b.timeline if p.time_ms]
    if not times:
        return []
    fastest = min(times)
    lines = ["", "iteration timeline (bar: the run's fastest time = full)"]
    for b in r.branches:
        lines.append(f"  [{b.name}]")
        for p in b.timeline:
            action = p.action or "-"
            if p.time_ms:
                filled = min(TIMELINE_BAR, int(TIMELINE_BAR * fastest / p.time_ms))
                bar = "#" * filled + "." * (TIMELINE_BAR - filled)
                extra = f"  score {p.score:.3g}" if r.cases and p.score is not None else ""
                star = "  *" if p.new_best else ""
                gone = "  (superseded)" if p.superseded else ""
                lines.append(f"    iter{p.iteration:>2}: {p.time_ms:9.4g} ms  [{bar}]  {action:8s}{extra}{star}{gone}")
            else:
                gone = " (superseded)" if p.superseded else ""
                lines.append(
                    f"    iter{p.iteration:>2}: {'-':>9}     [{' ' * TIMELINE_BAR}]  {action:8s}  (no result){gone}"
                )
    return lines
