"""The original's columns of ``cacao collect`` (its collect_results.py's), and experiment folders.

For each problem's output/ (ours, or one the original CACAO wrote: the keys below are in both):

- **model**: ``run_meta.json``'s provider/model, else context.json's settings;
- **gpu**: ``context.json``'s ``gpu_info.model`` (ours: the GPU the run used);
- **throughput**: the problem's declared physical floor over the best time, in GFLOP/s when it
  counts flops, else GB/s (the original's is a per-problem formula in its script; ours is the
  problem's own ``physical_floor``, so every problem has one when it declares it);
- **iters to best**: iterations on the best kernel's root-to-leaf path, its own included
  (``path_iters_consumed`` of its branch + its iteration);
- **correct**: iterations that produced a validated configuration / iterations that reached
  tuning (``results_summary``'s ``num_successful`` > 0 / ``num_total`` present);
- **api calls**: ``token_usage.json``'s ``api_calls``;
- **experiment**: the experiment folder the run was found in (empty for a problem given directly).

An argument of ``cacao collect`` that is not a problem directory is an **experiments folder**:
each problem directory in it is a run of that experiment (the folder's name), and each folder in
it that holds problem directories is an experiment of its own (the original's
``experiments/<name>/<problem>/`` layout; ``cacao suite --models`` writes one per model).
Every file is read with a size cap, links are not followed, the walk is bounded.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cacao_tui.store.results import LoadedResults
from ktt.capped_read import finite_number, parse_json, read_bytes_capped

FACT_COLUMNS = ("model", "gpu", "throughput", "iters to best", "correct", "api calls", "experiment")
MAX_JSON_BYTES = 64 * 1024 * 1024
MAX_STATES = 20_000  # state.json files looked at per run
MAX_EXPERIMENT_ENTRIES = 10_000


@dataclass
class RunFacts:
    model: str = ""
    gpu: str = ""
    throughput: str = ""
    iters_to_best: int | None = None
    correct: str = ""
    api_calls: int | None = None
    experiment: str = ""

    def cells(self) -> list[str]:
        return [
            self.model,
            self.gpu,
            self.throughput,
            "" if self.iters_to_best is None else str(self.iters_to_best),
            self.correct,
            "" if self.api_calls is None else str(self.api_calls),
            self.experiment,
        ]


def _json(path: Path) -> Any:
    try:
        return parse_json(read_bytes_capped(path, MAX_JSON_BYTES, follow_links=False).decode("utf-8", "replace"))
    except (OSError, ValueError):
        return None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any, limit: int = 80) -> str:
    return str(value)[:limit] if isinstance(value, str) else ""


def _state_files(output: Path) -> list[Path]:
    found: list[Path] = []
    for folder, dirs, files in os.walk(output / "branches", followlinks=False):
        dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(folder, d)))
        if "state.json" in files:
            found.append(Path(folder) / "state.json")
        if len(found) >= MAX_STATES:
            break
    return found


def correctness(output: Path) -> str:
    """``ok/done``: iterations with a validated configuration / iterations that reached tuning."""
    ok = done = 0
    for path in _state_files(output):
        state = _dict(_json(path))
        summary = state.get("results_summary")
        if isinstance(summary, dict) and summary.get("num_total") is not None:
            done += 1
            ok += (finite_number(summary.get("num_successful")) or 0) > 0
        elif "results_summary" not in state and isinstance(state.get("run"), dict):  # ours, before the key
            done += 1
            ok += (finite_number(state["run"].get("valid")) or 0) > 0
    return f"{ok}/{done}" if done else ""


def _branch_dir(output: Path, name: str) -> Path | None:
    direct = output / "branches" / name
    if (direct / "branch.json").is_file():
        return direct
    for folder, dirs, _ in os.walk(output / "branches", followlinks=False):  # the original nests sub-branches
        if os.path.basename(folder) == name and os.path.isfile(os.path.join(folder, "branch.json")):
            return Path(folder)
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]
    return None


def _throughput(context: dict[str, Any], best_ms: float | None) -> str:
    if not best_ms or best_ms <= 0:
        return ""
    flops, nbytes = finite_number(context.get("floor_flops")), finite_number(context.get("floor_bytes"))
    if flops:
        return f"{flops / (best_ms * 1e-3) / 1e9:.4g} GFLOP/s"
    if nbytes:
        return f"{nbytes / (best_ms * 1e-3) / 1e9:.4g} GB/s"
    return ""


def run_facts(problem_dir: Path, loaded: LoadedResults, experiment: str = "") -> RunFacts:
    output = problem_dir / "output"
    facts = RunFacts(experiment=experiment)
    if not output.is_dir():
        return facts
    context = _dict(_json(output / "context.json"))
    meta = _dict(_json(output / "run_meta.json"))
    settings = _dict(context.get("settings"))
    provider = _text(meta.get("provider")) or _text(settings.get("provider"))
    model = _text(meta.get("model")) or _text(settings.get("model"))
    facts.model = f"{provider}/{model}" if provider and model else model
    facts.gpu = _text(_dict(context.get("gpu_info")).get("model")) or _text(_dict(context.get("gpu")).get("name"))
    calls = finite_number(_dict(_json(output / "token_usage.json")).get("api_calls"))
    facts.api_calls = int(calls) if calls is not None and calls >= 0 else None
    facts.correct = correctness(output)
    best = loaded.results.best if loaded.results is not None else None
    if best is not None:
        facts.throughput = _throughput(context, best.time_ms)
        branch = _branch_dir(output, best.branch)
        manifest = _dict(_json(branch / "branch.json")) if branch is not None else {}
        before = finite_number(manifest.get("path_iters_consumed", manifest.get("path_before")))
        facts.iters_to_best = int(before or 0) + best.iteration
    return facts


def is_problem(path: Path) -> bool:
    return (path / "problem.yaml").is_file()


def experiment_runs(folder: Path) -> list[tuple[Path, str]]:
    """(problem directory, experiment) of every run in an experiments folder, sorted by name."""
    runs: list[tuple[Path, str]] = []
    entries = sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink())[:MAX_EXPERIMENT_ENTRIES]
    for entry in entries:
        if is_problem(entry):
            runs.append((entry.resolve(), folder.name))
            continue
        inner = sorted(p for p in entry.iterdir() if p.is_dir() and not p.is_symlink())[:MAX_EXPERIMENT_ENTRIES]
        runs += [(p.resolve(), entry.name) for p in inner if is_problem(p)]
    return runs
