"""The problems of a folder, each with what it is and how its last run went: the home
screen's list (``cacao`` without ``--dir``)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from cacao_tui.problem import ProblemError, load_problem
from cacao_tui.runs.last_run import UNREADABLE, LastRun, last_run

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


_Loaded = tuple[str, str | None, int | None, str | None]  # name, reference, cases, error
_loaded: dict[Path, tuple[tuple[tuple[int, int], ...], _Loaded]] = {}  # the list re-reads every 2 s


def _signature(directory: Path) -> tuple[tuple[int, int], ...]:
    """What a change to the problem's definition changes: its two files' mtimes and sizes."""
    out = []
    for name in ("problem.yaml", "inputs.yaml"):
        try:
            st = (directory / name).stat()
            out.append((st.st_mtime_ns, st.st_size))
        except OSError:
            out.append((0, -1))
    return tuple(out)


def _load(directory: Path) -> _Loaded:
    signature = _signature(directory)
    cached = _loaded.get(directory)
    if cached is not None and cached[0] == signature:
        return cached[1]
    try:
        problem = load_problem(directory)
        loaded: _Loaded = (problem.name, problem.reference.type, len(problem.shapes), None)
    except ProblemError as exc:
        loaded = (directory.name, None, None, exc.line())
    except Exception as exc:  # one hostile problem must not take the list down: its row says why
        loaded = (directory.name, None, None, f"{directory}: cannot be read ({type(exc).__name__}: {exc})"[:500])
    if len(_loaded) > 4 * MAX_PROBLEMS:
        _loaded.clear()
    _loaded[directory] = (signature, loaded)
    return loaded


def describe_problem(directory: Path) -> ProblemEntry:
    """One row: loads the problem (no compiling; --check does that; again only when its files
    changed) and reads its last run."""
    name, reference, cases, error = _load(directory)
    try:
        last = last_run(directory)
    except Exception as exc:  # run files this version cannot read: shown on the row
        last = LastRun(UNREADABLE, message=f"its output/ cannot be read ({type(exc).__name__}: {exc})"[:300])
    return ProblemEntry(directory, name, reference, cases, error, last)


def scan_problems(folder: Path) -> list[ProblemEntry]:
    return [describe_problem(d) for d in problem_dirs(folder)]
