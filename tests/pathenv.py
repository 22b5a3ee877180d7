"""PYTHONPATH for the children tests start: the checkout first, then whatever the caller had.

On the GPU machine the project's dependencies live in a carried site directory named on
PYTHONPATH (scripts/gpu-check.sh), so a child given only the checkout could not import pydantic.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child_pythonpath() -> str:
    inherited = os.environ.get("PYTHONPATH", "")
    return os.pathsep.join(p for p in (str(ROOT), inherited) if p)
