"""Prompt templates as text files. A prompt change is a text diff.

Templates use ``string.Template`` placeholders (``$name`` / ``${name}``) so CUDA braces
need no escaping; a literal dollar sign is written ``$$``.
"""

from __future__ import annotations

import string
from functools import cache
from importlib import resources


@cache
def load(name: str) -> str:
    return (resources.files(__package__) / f"{name}.txt").read_text(encoding="utf-8")


def render(template: str, /, **values: object) -> str:
    """Fill a template; a missing placeholder is a bug and raises KeyError."""
    return string.Template(load(template)).substitute({k: str(v) for k, v in values.items()})


def gpu_knowledge(arch: str) -> str:
    """Optimisation notes for the detected GPU generation (sm_90 -> Hopper)."""
    digits = "".join(c for c in arch if c.isdigit())
    major = int(digits[:-1]) if len(digits) >= 2 else 0
    if major == 9:
        return load("gpu/hopper")
    if major == 8:
        return load("gpu/ampere_ada")
    return load("gpu/generic")
