"""How the original CACAO's ``collect_results.py`` reads a run's output/, written for these tests
from its documented behaviour (its docstring's columns and the files and keys it names), not
copied from it. The tests point it at an output/ that cacao wrote, to show that a CACAO user's
collector finds our times, tokens and timestamps.

What it reads, per run directory's output/:
- ``branches/**/branch.json`` (recursively: sub-branches nest there): ``best_time_us`` picks the
  best branch (the lowest), ``current_iter`` is the fallback best iteration,
  ``path_iters_consumed`` counts the iterations before the branch began on its root-to-leaf
  path (without it: the parent's iteration folders are counted, walking up the nesting);
- each branch's ``iterN/state.json``: ``iter_num`` and ``results_summary.best_time_us`` pick the
  best iteration; every ``state.json`` with a ``results_summary.num_total`` is a finished
  iteration, a successful one when ``num_successful`` > 0 (the correctness rate);
- the GPU: KTT's ``iterN/results.json`` ``Metadata.Device`` (of the best iteration, else any),
  else ``context.json``'s ``gpu_info.model``;
- ``run.log``: the minutes between its first and last ``[HH:MM:SS]`` line (one midnight wrap);
- ``token_usage.json``: ``api_calls``, ``prompt_tokens``, ``completion_tokens``, ``total_tokens``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

STAMP = re.compile(r"^\[(\d\d):(\d\d):(\d\d)\]")


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def manifests(output: Path) -> list[Path]:
    root = output / "branches"
    return sorted(root.rglob("branch.json")) if root.is_dir() else []


def iteration_dirs(branch: Path) -> list[Path]:
    return sorted(p for p in branch.iterdir() if p.is_dir() and p.name.startswith("iter"))


def best_branch(output: Path) -> tuple[Path | None, dict[str, Any] | None]:
    found: tuple[float, Path, dict[str, Any]] | None = None
    for path in manifests(output):
        data = _json(path) or {}
        t = data.get("best_time_us")
        if t is not None and (found is None or t < found[0]):
            found = (t, path.parent, data)
    return (found[1], found[2]) if found else (None, None)


def best_iteration(branch: Path) -> int | None:
    found: tuple[float, int] | None = None
    for d in iteration_dirs(branch):
        state = _json(d / "state.json") or {}
        t = (state.get("results_summary") or {}).get("best_time_us")
        if t is not None and (found is None or t < found[0]):
            found = (t, state.get("iter_num") or int(d.name[len("iter") :]))
    return found[1] if found else None


def iterations_to_best(branch: Path, best_iter: int) -> int:
    consumed = (_json(branch / "branch.json") or {}).get("path_iters_consumed")
    if consumed is not None:
        return consumed + best_iter
    total, here = best_iter, branch
    while here.parent.name == "branches" and (here.parent.parent / "branch.json").exists():
        here = here.parent.parent
        total += len(iteration_dirs(here))
    return total


def gpu(output: Path, branch: Path | None, best_iter: int | None) -> str | None:
    candidates = [branch / f"iter{best_iter}" / "results.json"] if branch and best_iter else []
    candidates += sorted(output.rglob("results.json"))
    for path in candidates:
        device = ((_json(path) or {}).get("Metadata") or {}).get("Device") if path.exists() else None
        if device:
            return device
    return ((_json(output / "context.json") or {}).get("gpu_info") or {}).get("model")


def wall_clock_minutes(output: Path) -> float | None:
    seconds = []
    log = output / "run.log"
    if not log.exists():
        return None
    for line in log.read_text(encoding="utf-8").splitlines():
        m = STAMP.match(line)
        if m:
            seconds.append(int(m[1]) * 3600 + int(m[2]) * 60 + int(m[3]))
    if len(seconds) < 2 or seconds[0] == seconds[-1]:
        return None
    delta = seconds[-1] - seconds[0]
    return (delta + 86400 if delta < 0 else delta) / 60


def correctness(output: Path) -> tuple[int, int]:
    ok = done = 0
    for path in output.rglob("state.json"):
        summary = (_json(path) or {}).get("results_summary") or {}
        if summary.get("num_total") is None:
            continue
        done += 1
        ok += (summary.get("num_successful") or 0) > 0
    return ok, done


def collect(output: Path) -> dict[str, Any]:
    """One row, the original's columns that do not depend on its per-problem formulas."""
    tokens = _json(output / "token_usage.json") or {}
    branch, manifest = best_branch(output)
    row: dict[str, Any] = {
        "best_time_us": None,
        "iters_to_best_path": None,
        "gpu": None,
        "wall_clock_min": wall_clock_minutes(output),
        "prompt_tokens": tokens.get("prompt_tokens"),
        "completion_tokens": tokens.get("completion_tokens"),
        "tokens_total": tokens.get("total_tokens"),
        "api_calls": tokens.get("api_calls"),
        "correctness_rate": "{}/{}".format(*correctness(output)),
        "strategies_explored": len(manifests(output)),
    }
    if branch is not None and manifest is not None:
        best_iter = best_iteration(branch) or manifest.get("current_iter") or 1
        row["best_time_us"] = manifest.get("best_time_us")
        row["iters_to_best_path"] = iterations_to_best(branch, best_iter)
        row["gpu"] = gpu(output, branch, best_iter)
    else:
        row["gpu"] = gpu(output, None, None)
    return row
