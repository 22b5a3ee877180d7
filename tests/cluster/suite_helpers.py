"""Problem copies and a ``cacao`` command line for the suite tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.pathenv import child_pythonpath

ROOT = Path(__file__).resolve().parents[2]


def mmul_copies(tmp_path: Path, n: int) -> list[Path]:
    """``n`` copies of the shipped mmul problem (it has a recorded session for --provider replay)."""
    out = []
    for i in range(n):
        target = tmp_path / "problems" / f"mmul{i + 1}"
        shutil.copytree(ROOT / "problems" / "mmul", target, ignore=shutil.ignore_patterns("output", "archive"))
        out.append(target)
    return out


def cacao(*args: str, cwd: Path, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=child_pythonpath())
    return subprocess.run([sys.executable, "-m", "cacao_tui", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)  # fmt: skip
