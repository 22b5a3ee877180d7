"""A small valid problem directory for the bounds tests, and the hostile inputs they share.

(A module with a unique name: the test directories are not packages.)
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from tests.proc_tree import run_measured

__all__ = ["ALIAS_BOMB", "TINY", "ktt_check_argv", "make_problem", "one_line", "run_measured", "scale_spec"]

TINY = Path(__file__).resolve().parents[1] / "ktt" / "data" / "tiny"

# A 1 KB YAML "billion laughs": nine levels of nine references, 9^9 (387 million) strings once expanded.
ALIAS_BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]\n"
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
)


def scale_spec(*blocks: int) -> str:
    """A tuning.yaml for the tiny problem's ``scale`` kernel over the given block sizes."""
    return f"""tune_params:
  BLOCK: [{", ".join(map(str, blocks))}]
  UNROLL: [1]
  BEHAVIOUR: [0]
launches:
  - kernel: scale
    grid: {{x: (N + BLOCK - 1) / BLOCK}}
    block: {{x: BLOCK}}
"""


def make_problem(tmp_path: Path) -> Path:
    """A copy of the tiny test problem (a cuda reference, one scalar N, two buffers, two cases)."""
    root = tmp_path / "problem"
    shutil.copytree(TINY, root)
    return root


def one_line(text: str) -> bool:
    return "\n" not in text.strip() and "Traceback" not in text


def ktt_check_argv(root: Path, cache: Path, *extra: str) -> list[str]:
    """``python -m ktt check`` of the problem's kernels.cu and tuning.yaml, with a JSON report."""
    return [sys.executable, "-m", "ktt", "check", "--problem", str(root), "--kernel", str(root / "kernels.cu"),
            "--spec", str(root / "tuning.yaml"), "--cache-dir", str(cache), "--json", *extra]  # fmt: skip
