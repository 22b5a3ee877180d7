"""A small valid problem directory for the bounds tests, and the hostile inputs they share.

(A module with a unique name: the test directories are not packages.)
"""

from __future__ import annotations

import shutil
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
