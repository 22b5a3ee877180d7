"""A run the original CACAO wrote: its output/ (or archive/output_N), read into our results models.

A CACAO user's old runs stay readable: ``cacao --best``, ``--export`` and the app's results
view show them as they show ours. Nothing here writes a file, and cacao never continues such a
run (``--resume`` and ``--branch`` refuse, see ``refusal``): its state has another shape.

The original's layout, from its state models (lukdmine/CACAO state/types.py, utils/files.py,
utils/results.py, nodes/merge.py; facts only):

- ``context.json``: ``{"analysis": ..., "gpu_info": ...}`` (no problem name, no settings);
- ``branches/<name>/branch.json``: the manifest, ``strategy`` (``name``, ``description``, ...),
  ``branch_depth``, ``current_iter``, ``max_iter``, ``status`` (initialized | running | success |
  failed | branching | stopped), ``best_time_us``, ``speedup``; ``branch_config.json`` beside it;
- ``branches/<name>/iterN/state.json``: ``iter_num``, ``status``, ``decision`` (a dict with
  ``action``), ``results_summary`` (``best_time_us``, ``best_config``, ``speedup``, ...);
  ``iterN/results.json``: KTT's results (``Results``: ``Status``, ``Configuration`` as
  ``[{Name, Value}]``, ``ComputationResults[].Duration`` in µs);
- sub-branches nested as ``branches/<name>/branches/<sub>/``, to any depth;
- ``final_results.json``: ``best_branch``, ``best_config``, ``best_time_us``, ``speedup``,
  ``all_branches``; ``reference_time.json`` as ours reads it (``cases``: µs per case);
- a problem with ``cases:`` (newer runs): each case is built and tuned in
  ``iterN/case_<name>/`` (its own KTT ``results.json``), and ``results_summary`` keeps the
  primary case's keys flat and adds ``cases`` (``{name: summary or null}``, null for a case
  that did not run), ``geomean_speedup`` (also its ``speedup``; null when a case has no
  result or no reference), ``failed_case`` and ``worst_case``.

Every file is read with a size cap, links are not followed, and the walk is bounded: a run
directory is untrusted input like any other.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cacao_tui.store.layout import ITER_DIR
from cacao_tui.store.state import (
    BestResult,
    BranchSummary,
    CaseOutcome,
    FinalResults,
    IterationPoint,
    OriginalBranchEntry,
    ParamValue,
)
from ktt.capped_read import finite_number, parse_json, read_bytes_capped

MAX_FILE_BYTES = 32 * 1024 * 1024  # an iteration's state.json carries its kernel and the tuner's output
MAX_BRANCHES = 2000
MAX_ITERATIONS = 500  # per branch
MAX_DEPTH = 16
MAX_CASES = 64
# The original's branch statuses, as ours (store.state.BranchStatus).
STATUS = {
    "success": "done",
    "branching": "done",
    "failed": "failed",
    "stopped": "stopped",
    "running": "running",
    "initialized": "pending",
}
# Branches whose best the original's merge counts (nodes/merge.py: get_best_branch_result).
ELIGIBLE = ("success", "branching")
FINISHED_ITERATION = ("decided", "success", "failed", "branching")
FROM_ORIGINAL = "the original CACAO's output/ (read as it is; nothing written)"


def refusal(output: Path, problem_dir: Path, what: str) -> str:
    """The one line for ``--resume`` / ``--branch`` on the original's run: why, and how to start fresh."""
    return (
        f"{output}: holds a run written by the original CACAO; cacao reads it (--best, --export) but cannot "
        f"{what} it. Start fresh with 'cacao --dir {problem_dir}' (that run is moved to archive/output_N first, "
        "nothing is deleted)"
    )


def _read_json(path: Path, notes: list[str] | None = None) -> Any:
    """The JSON in ``path`` (capped, links not followed); None when absent or unreadable (with a note)."""
    try:
        data = read_bytes_capped(path, MAX_FILE_BYTES, follow_links=False)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if notes is not None:
            notes.append(f"skipped {path}: {exc}")
        return None
    try:
        return parse_json(data.decode("utf-8"))  # nesting too deep: a ValueError like any bad JSON
    except (UnicodeDecodeError, ValueError) as exc:
        if notes is not None:
            notes.append(f"skipped {path}: not valid JSON ({type(exc).__name__})")
        return None


def _case_references(output: Path, notes: list[str]) -> dict[str, float | None]:
    """reference_time.json's ``cases`` (µs per case; None: no baseline), as the original writes it."""
    data = _read_json(output / "reference_time.json", notes)
    cases = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(cases, dict):
        return {}
    return {str(k)[:100]: _number(v) for k, v in list(cases.items())[:MAX_CASES]}


def _is_original_manifest(data: Any) -> bool:
    return isinstance(data, dict) and "name" not in data and any(k in data for k in ("current_iter", "branch_depth"))


def is_original_output(output: Path) -> bool:
    """Whether ``output`` holds a run in the original CACAO's layout (not ours)."""
    if not output.is_dir() or output.is_symlink():
        return False
    context = _read_json(output / "context.json")
    if isinstance(context, dict) and "analysis" in context and "problem_name" not in context:
        return True
    branches = output / "branches"
    if not branches.is_dir() or branches.is_symlink():
        return False
    for entry in sorted(os.scandir(branches), key=lambda e: e.name)[:50]:
        if entry.is_dir(follow_symlinks=False) and _is_original_manifest(_read_json(Path(entry.path) / "branch.json")):
            return True
    return False


def _number(value: Any) -> float | None:
    """A duration, time or speedup of the original's files: a finite number (a 400-digit one is none)."""
    return finite_number(value)


def _config(value: Any) -> dict[str, ParamValue]:
    """A best_config dict, or KTT's ``[{Name, Value}]`` list, as ours."""
    if isinstance(value, dict):
        pairs = value.items()
    elif isinstance(value, list):
        pairs = ((p.get("Name"), p.get("Value")) for p in value if isinstance(p, dict))
    else:
        return {}
    return {str(k): v for k, v in pairs if isinstance(k, str) and isinstance(v, (int, float, str))}


def _ktt_best(results: Any) -> tuple[float | None, dict[str, ParamValue]]:
    """(µs, config) of the fastest ``Ok`` result of a KTT results.json, as utils/results.py picks it."""
    rows = results.get("Results") if isinstance(results, dict) else None
    best: tuple[float, dict[str, ParamValue]] | None = None
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, dict) or row.get("Status") != "Ok":
            continue
        parts = row.get("ComputationResults")
        parts = parts if isinstance(parts, list) else []
        total = sum(_number(p.get("Duration")) or 0.0 for p in parts if isinstance(p, dict))
        us = total if total > 0 else _number(row.get("TotalDuration"))
        if us is not None and us > 0 and (best is None or us < best[0]):
            best = (us, _config(row.get("Configuration")))
    return best if best is not None else (None, {})


@dataclass
class _Iteration:
    index: int
    status: str
    time_us: float | None
    speedup: float | None
    config: dict[str, ParamValue]
    action: str | None
    kernel: str | None  # relative to output/
    cases: list[CaseOutcome]
    score: float | None  # with cases: the geometric mean of their speedups


def _case(name: str, summary: Any, reference_us: float | None) -> CaseOutcome:
    """One case of a results_summary's ``cases`` (None: the case did not run), as ours."""
    if not isinstance(summary, dict):
        return CaseOutcome(name=name, status="not_run")
    time_us = _number(summary.get("best_time_us"))
    ref_us = _number(summary.get("reference_time_us")) or reference_us
    speedup = _number(summary.get("speedup"))
    if speedup is None and time_us and ref_us:
        speedup = ref_us / time_us
    total, ok = _number(summary.get("num_total")), _number(summary.get("num_successful"))
    return CaseOutcome(
        name=name,
        status="ok" if time_us else "no_valid",
        time_ms=time_us / 1e3 if time_us else None,
        reference_ms=ref_us / 1e3 if ref_us else None,
        speedup=speedup,
        config=_config(summary.get("best_config")) or None,
        evaluated=int(total or 0),
        valid=int(ok or 0),
    )


def _cases(d: Path, summary: dict[str, Any], case_refs: dict[str, float | None], notes: list[str]) -> list[CaseOutcome]:
    """The iteration's cases: from results_summary's ``cases``, else from each ``case_<name>/results.json``."""
    cases = summary.get("cases")
    if isinstance(cases, dict):
        return [_case(str(name)[:100], s, case_refs.get(str(name))) for name, s in list(cases.items())[:MAX_CASES]]
    found = []
    with os.scandir(d) as entries:
        for entry in entries:
            if entry.name.startswith("case_") and entry.is_dir(follow_symlinks=False):
                found.append(entry.name[len("case_") :])
    out = []
    for name in sorted(found)[:MAX_CASES]:
        time_us, config = _ktt_best(_read_json(d / f"case_{name}" / "results.json", notes))
        ref = case_refs.get(name)
        out.append(_case(name, {"best_time_us": time_us, "best_config": config, "reference_time_us": ref}, ref))
    return out


def _geomean(cases: list[CaseOutcome]) -> float | None:
    """The original's score: the geometric mean of every case's speedup; None if one has none."""
    if not cases or any(c.speedup is None or c.speedup <= 0 for c in cases):
        return None
    return math.exp(sum(math.log(c.speedup) for c in cases if c.speedup) / len(cases))


@dataclass
class _Branch:
    name: str
    path: Path
    parent: str | None
    depth: int
    manifest: dict[str, Any]
    iterations: list[_Iteration]


def _iterations(
    branch: Path, output: Path, reference_us: float | None, case_refs: dict[str, float | None], notes: list[str]
) -> list[_Iteration]:
    found = []
    with os.scandir(branch) as entries:
        for entry in entries:
            m = ITER_DIR.match(entry.name)
            if m and entry.is_dir(follow_symlinks=False):
                found.append((int(m.group(1)), Path(entry.path)))
    out = []
    for index, d in sorted(found)[:MAX_ITERATIONS]:
        state = _read_json(d / "state.json", notes)
        state = state if isinstance(state, dict) else {}
        summary = state.get("results_summary") if isinstance(state.get("results_summary"), dict) else {}
        time_us = _number(summary.get("best_time_us"))
        config = _config(summary.get("best_config"))
        if time_us is None:
            time_us, config = _ktt_best(_read_json(d / "results.json", notes))
        speedup = _number(summary.get("speedup"))
        if speedup is None and time_us and reference_us:
            speedup = reference_us / time_us
        decision = state.get("decision") if isinstance(state.get("decision"), dict) else {}
        action = decision.get("action") if isinstance(decision.get("action"), str) else None
        kernel = next((d / n for n in ("kernels.cu", "kernel.cu") if (d / n).is_file()), None)
        cases = _cases(d, summary, case_refs, notes)
        score = None
        if cases:
            score = _number(summary.get("geomean_speedup")) if "geomean_speedup" in summary else _geomean(cases)
            primary = cases[0]
            if time_us is None and primary.time_ms is not None:  # no flat keys: the primary case's
                time_us, config = primary.time_ms * 1e3, dict(primary.config or {})
            if speedup is None or "geomean_speedup" in summary:
                speedup = primary.speedup  # ours: the primary's own; the score is the geometric mean
        out.append(
            _Iteration(
                index=index,
                status=str(state.get("status") or "unknown")[:40],
                time_us=time_us if time_us and time_us > 0 else None,
                speedup=speedup,
                config=config,
                action=action[:40] if action else None,
                kernel=str(kernel.relative_to(output)) if kernel else None,
                cases=cases,
                score=score,
            )
        )
    return out


def _walk(output: Path, reference_us: float | None, case_refs: dict[str, float | None],
          notes: list[str]) -> list[_Branch]:  # fmt: skip
    """Every branch, parents before children (depth-first, siblings by name), bounded."""
    out: list[_Branch] = []
    seen_names: set[str] = set()

    def visit(branches: Path, parent: str | None, depth: int) -> None:
        if depth > MAX_DEPTH or not branches.is_dir() or branches.is_symlink():
            return
        with os.scandir(branches) as it:
            dirs = sorted(e.name for e in it if e.is_dir(follow_symlinks=False))
        for leaf in dirs:
            if len(out) >= MAX_BRANCHES:
                notes.append(f"more than {MAX_BRANCHES} branches under {output / 'branches'}; the rest are not shown")
                return
            path = branches / leaf
            manifest = _read_json(path / "branch.json", notes)
            if not isinstance(manifest, dict):
                continue
            name = leaf if leaf not in seen_names else str(path.relative_to(output / "branches"))
            seen_names.add(name)
            its = _iterations(path, output, reference_us, case_refs, notes)
            out.append(_Branch(name, path, parent, depth, manifest, its))
            visit(path / "branches", name, depth + 1)

    visit(output / "branches", None, 0)
    return out


def _summary(b: _Branch, reference_us: float | None) -> tuple[BranchSummary, BestResult | None]:
    m = b.manifest
    status = str(m.get("status") or "unknown")
    timeline: list[IterationPoint] = []
    best: _Iteration | None = None
    for it in b.iterations:
        improved = it.time_us is not None and (best is None or best.time_us is None or it.time_us < best.time_us)
        if improved:
            best = it
        timeline.append(
            IterationPoint(
                iteration=it.index,
                status=it.status,
                time_ms=it.time_us / 1e3 if it.time_us else None,
                speedup=it.speedup,
                score=it.score,
                action=it.action or (it.status if it.status in ("success", "failed", "branching") else None),
                new_best=improved,
            )
        )
    best_us = best.time_us if best else _number(m.get("best_time_us"))
    speedup = best.speedup if best else _number(m.get("speedup"))
    if speedup is None and best_us and reference_us:
        speedup = reference_us / best_us
    result = None
    if best_us:
        result = BestResult(
            branch=b.name,
            iteration=best.index if best else max((it.index for it in b.iterations), default=0),
            time_ms=best_us / 1e3,
            speedup=speedup,
            config=best.config if best else {},
            kernel_path=(best.kernel if best else None) or "",
            cases=best.cases if best else [],
            score=best.score if best else None,
        )
    strategy = m.get("strategy") if isinstance(m.get("strategy"), dict) else {}
    title = str(strategy.get("description") or strategy.get("name") or b.name).split("\n")[0][:200]
    finished = sum(it.status in FINISHED_ITERATION for it in b.iterations)
    summary = BranchSummary(
        name=b.name,
        title=title,
        parent=b.parent,
        depth=b.depth,
        status=STATUS.get(status, "stopped"),
        iterations=finished,
        best_ms=result.time_ms if result else None,
        speedup=speedup if result else None,
        score=result.score if result else None,
        best_iteration=result.iteration if result else None,
        stop_reason=f"original status: {status[:40]}",
        timeline=timeline,
        kernel_path=result.kernel_path or None if result else None,
    )
    return summary, result if status in ELIGIBLE else None


def collect_original_results(output: Path, problem_name: str, reference_ms: float | None,
                             reference_source: str | None) -> tuple[FinalResults, list[str]]:  # fmt: skip
    """The run in ``output`` (the original's layout) as our FinalResults, and notes on unreadable files.

    ``reference_ms``/``reference_source``: the denominator from its reference_time.json, as the
    caller read it. The best is the fastest branch the original's merge counts (success or
    branching), by time; ``complete`` when the original wrote its final_results.json.
    """
    notes: list[str] = []
    reference_us = reference_ms * 1e3 if reference_ms else None
    branches = _walk(output, reference_us, _case_references(output, notes), notes)
    summaries: list[BranchSummary] = []
    best: BestResult | None = None
    entries: list[OriginalBranchEntry] = []
    for b in branches:
        summary, eligible = _summary(b, reference_us)
        summaries.append(summary)
        if eligible is not None and (best is None or eligible.time_ms < best.time_ms):
            best = eligible
        entries.append(
            OriginalBranchEntry(
                name=b.name,
                path=str(b.path),
                status="success" if summary.best_ms is not None else "failed",
                best_time_us=summary.best_ms * 1e3 if summary.best_ms is not None else None,
                speedup=summary.speedup,
                iterations=summary.iterations,
            )
        )
    final = _read_json(output / "final_results.json", notes)
    shapes = [c.name for c in best.cases] if best is not None else []
    if not shapes:
        shapes = next(([c.name for c in it.cases] for b in branches for it in b.iterations if it.cases), [])
    results = FinalResults(
        problem_name=problem_name,
        cases=shapes,
        complete=isinstance(final, dict),
        rebuilt=True,
        reference_ms=reference_ms,
        reference_source=reference_source,
        best=best,
        branches=summaries,
        best_branch=best.branch if best else None,
        best_config=dict(best.config) if best else None,
        best_time_us=best.time_ms * 1e3 if best else None,
        speedup=(best.score if shapes else best.speedup) if best else None,  # the original's: the geomean
        reference_time_us=reference_us,
        total_branches=len(summaries),
        all_branches=entries,
    )
    return results, notes
