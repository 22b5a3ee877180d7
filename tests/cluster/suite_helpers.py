"""Problem copies, a snapshot of a problem's own files and a ``cacao`` command line for the suite tests."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.pathenv import child_pythonpath

ROOT = Path(__file__).resolve().parents[2]
# Every problem the checkout ships; each has a recorded session (session.jsonl) for --provider replay.
SHIPPED = sorted(p.name for p in (ROOT / "problems").iterdir() if (p / "problem.yaml").is_file())
# What a run may add to a problem directory: all of it is in .gitignore (problems/*/output/ ...).
RUN_FILES = ("output", "archive", "output.lock", "inputs.hpp")


def mmul_copies(tmp_path: Path, n: int) -> list[Path]:
    """``n`` copies of the shipped mmul problem."""
    out = []
    for i in range(n):
        target = tmp_path / "problems" / f"mmul{i + 1}"
        shutil.copytree(ROOT / "problems" / "mmul", target, ignore=shutil.ignore_patterns(*RUN_FILES))
        out.append(target)
    return out


def shipped_copies(tmp_path: Path) -> list[Path]:
    """A copy of every shipped problem, under its own name, without any earlier run's files."""
    out = []
    for name in SHIPPED:
        target = tmp_path / "problems" / name
        shutil.copytree(ROOT / "problems" / name, target, ignore=shutil.ignore_patterns(*RUN_FILES))
        out.append(target)
    return out


def problem_files(directory: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file of the problem itself (what a run writes left out)."""
    found = {}
    for path in sorted(directory.rglob("*")):
        rel = path.relative_to(directory)
        if rel.parts[0] in RUN_FILES or "__pycache__" in rel.parts or not path.is_file():
            continue
        found[rel.as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def cacao(*args: str, cwd: Path, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=child_pythonpath())
    return subprocess.run([sys.executable, "-m", "cacao_tui", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)  # fmt: skip
