"""A small valid problem directory for the bounds tests, and the hostile inputs they share.

(A module with a unique name: the test directories are not packages.)
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

TINY = Path(__file__).resolve().parents[1] / "ktt" / "data" / "tiny"

# A 1 KB YAML "billion laughs": nine levels of nine references, 9^9 (387 million) strings once expanded.
ALIAS_BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]\n"
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
)


def make_problem(tmp_path: Path) -> Path:
    """A copy of the tiny test problem (a cuda reference, one scalar N, two buffers, two cases)."""
    root = tmp_path / "problem"
    shutil.copytree(TINY, root)
    return root


def one_line(text: str) -> bool:
    return "\n" not in text.strip() and "Traceback" not in text


_MEASURED = (
    "import json, resource, subprocess, sys, time\n"
    "t = time.monotonic()\n"
    "p = subprocess.run(sys.argv[2:], capture_output=True, text=True, timeout=float(sys.argv[1]))\n"
    "print(json.dumps([p.returncode, p.stdout, p.stderr, time.monotonic() - t,"
    " resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss]))\n"
)


def run_measured(argv: list[str], env: dict[str, str], timeout: float) -> tuple[int, str, str, float, int]:
    """Run ``argv`` from a helper process of its own: (exit code, stdout, stderr, seconds, the largest
    resident set among its descendants in KiB — the compile workers included)."""
    proc = subprocess.run([sys.executable, "-c", _MEASURED, str(timeout), *argv], capture_output=True, text=True,
                          env=env, timeout=timeout + 20)  # fmt: skip
    code, out, err, took, max_rss_kib = json.loads(proc.stdout)
    return code, out, err, took, max_rss_kib


def ktt_check_argv(root: Path, cache: Path, *extra: str) -> list[str]:
    """``python -m ktt check`` of the problem's kernels.cu and tuning.yaml, with a JSON report."""
    return [sys.executable, "-m", "ktt", "check", "--problem", str(root), "--kernel", str(root / "kernels.cu"),
            "--spec", str(root / "tuning.yaml"), "--cache-dir", str(cache), "--json", *extra]  # fmt: skip
