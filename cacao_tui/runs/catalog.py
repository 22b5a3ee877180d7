"""The problems of a folder, each with what it is and how its last run went: the home
screen's list (``cacao`` without ``--dir``)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from cacao_tui.problem import ProblemError, load_problem
from cacao_tui.runs.last_run import LastRun, last_run

MAX_PROBLEMS = 500  # a folder with more is not a folder of problems; the rest are not listed
TRASH = ".trash"  # deleted problems go to <folder>/.trash/ (hidden, so not listed)


@dataclass
class ProblemEntry:
    directory: Path
    name: str
    reference: str | None  # cuda, cpu_c, python; None when the problem does not load
    cases: int | None
    error: str | None  # the --check line when it does not load
    last: LastRun

    @property
    def key(self) -> str:
        return self.directory.name


def problem_dirs(folder: Path) -> list[Path]:
    """Sub-directories holding a problem.yaml, by name; hidden ones (the trash) are skipped."""
    try:
        names = sorted(e.name for e in os.scandir(folder) if not e.name.startswith(".") and e.is_dir())
    except OSError:
        return []
    found = []
    for name in names:
        path = folder / name
        if (path / "problem.yaml").is_file() and not path.is_symlink():
            found.append(path)
        if len(found) >= MAX_PROBLEMS:
            break
    return found


def describe_problem(directory: Path) -> ProblemEntry:
    """One row: loads the problem (no compiling; --check does that) and reads its last run."""
    last = last_run(directory)
    try:
        problem = load_problem(directory)
    except ProblemError as exc:
        return ProblemEntry(directory, directory.name, None, None, exc.line(), last)
    except (OSError, ValueError) as exc:
        return ProblemEntry(directory, directory.name, None, None, f"{directory}: {exc}", last)
    return ProblemEntry(directory, problem.name, problem.reference.type, len(problem.shapes), None, last)


def scan_problems(folder: Path) -> list[ProblemEntry]:
    return [describe_problem(d) for d in problem_dirs(folder)]
