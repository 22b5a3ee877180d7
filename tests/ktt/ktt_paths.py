"""Paths shared by the ktt tests (a module with a unique name: the test directories are not packages)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"
PROBLEMS = ("mmul", "transpose", "softmax", "stencil")
