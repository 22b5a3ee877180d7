"""``cacao suite --models A,B``: every problem run once per model, each in a copy of its own.

A problem directory holds one run at a time (its output/), so a sweep over models runs each in
a copy of the problem's definition (``--clone``'s copy: no runs, no generated files) under the
suite's folder, ``<out>/models/<model>/<problem>/``, as the original's experiments keep one
``<problem>_<model>`` directory per model. That folder is an experiments folder for
``cacao collect`` (one experiment per model). A copy made by an earlier sweep is used again
(its earlier run is archived by the new one, as always).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from cacao_tui.store.clone import clone_problem

MODELS_DIR = "models"


@dataclass(frozen=True)
class ModelRun:
    problem: Path  # the copy that runs
    model: str
    name: str  # the run's log name: <problem>@<model>


def model_list(text: str) -> list[str]:
    """'A,B' -> ['A', 'B']: distinct, non-empty; a ValueError (one line) otherwise."""
    models = [m.strip() for m in text.split(",")]
    if not text.strip() or any(not m for m in models):
        raise ValueError(f"--models: expected model names separated by commas, like glm-5.2,kimi-k2.6; got {text!r}")
    if len(set(models)) != len(models):
        raise ValueError(f"--models: a model is listed twice in {text!r}")
    return models


def folder_name(text: str) -> str:
    """A directory name for a model or a problem in the clone's alphabet (lowercase, digits, '_')."""
    return re.sub(r"[^a-z0-9_]+", "_", text.lower()).strip("_")[:80] or "x"


def model_runs(problems: list[Path], models: list[str], out: Path) -> list[ModelRun]:
    """One copy per (model, problem), made where it is missing; the runs in model-major order."""
    runs = []
    for model in models:
        home = out / MODELS_DIR / folder_name(model)
        home.mkdir(parents=True, exist_ok=True)
        for problem in problems:
            target = home / folder_name(problem.name)
            if not (target / "problem.yaml").is_file():
                clone_problem(problem, target.name, parent=home)
            runs.append(ModelRun(target, model, f"{problem.name}@{folder_name(model)}"))
    return runs
