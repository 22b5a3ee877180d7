"""The original CACAO's keys in our branch.json and iterN/state.json, derived from our fields.

Its ``collect_results.py`` (and scripts written against its output/) read, per branch,
``best_time_us`` (µs), ``speedup``, ``current_iter`` and ``path_iters_consumed`` from each
``branches/**/branch.json``, and per iteration ``iter_num`` and ``results_summary``
(``best_time_us``, ``num_total``, ``num_successful``, ...) from each ``state.json``. Ours
are written beside our own fields by the same writer in the same atomic write (pydantic
computed fields of ``store.state``), so they can never disagree with them; reading a file
back ignores them.

This module imports nothing from ``store.state`` (which imports it): it reads the fields
it needs by name.
"""

from __future__ import annotations

from typing import Any


def _us(ms: float | None) -> float | None:
    return None if ms is None else ms * 1e3


def branch_keys(m: Any) -> dict[str, Any]:
    """``best_time_us``, ``speedup`` and ``current_iter`` of a BranchManifest, as the original's."""
    best = m.best
    speedup = None
    if best is not None:
        speedup = best.score if best.score is not None else best.speedup  # with cases: the geometric mean
    return {
        "best_time_us": _us(best.time_ms) if best is not None else None,
        "speedup": speedup,
        # The iteration in progress, else the last one begun (the original counts from 1).
        "current_iter": m.current_iteration or max(m.iterations_done, 1),
    }


def _case_summary(case: Any) -> dict[str, Any] | None:
    if case.status == "not_run":
        return None
    ok = case.time_ms is not None
    return {
        "has_success": ok,
        "num_successful": case.valid,
        "num_total": case.evaluated,
        "best_config": dict(case.config) if case.config else None,
        "best_time_us": _us(case.time_ms),
        "reference_time_us": _us(case.reference_ms),
        "speedup": case.speedup,
    }


def iteration_summary(run: Any) -> dict[str, Any] | None:
    """``results_summary`` of an IterState's tuning outcome, as the original's (None: not tuned yet).

    Present once the iteration reached its tuning step, as in the original (a kernel that did
    not build has ``num_total`` 0); with ``cases:`` the flat keys are the primary case's,
    ``cases`` holds each case's (None: not run), ``speedup`` and ``geomean_speedup`` are the
    geometric mean (None when a case has no result), and ``failed_case`` / ``worst_case`` name
    the first case without a result and the one with the lowest speedup.
    """
    if run is None:
        return None
    summary: dict[str, Any] = {
        "has_success": run.valid > 0,
        "num_successful": run.valid,
        "num_total": run.evaluated,
        "best_config": dict(run.best_config) if run.best_config else None,
        "best_time_us": _us(run.best_ms),
        "reference_time_us": _us(run.reference_ms),
        "speedup": run.speedup,
    }
    if run.cases:
        cases = {c.name: _case_summary(c) for c in run.cases}
        summary["cases"] = cases
        failed = next((name for name, s in cases.items() if s is None or s["best_time_us"] is None), None)
        summary["failed_case"] = failed
        timed = [(s["speedup"], name) for name, s in cases.items() if s is not None and s["speedup"] is not None]
        summary["worst_case"] = min(timed)[1] if timed else None
        summary["geomean_speedup"] = run.score
        summary["speedup"] = run.score
    return summary
