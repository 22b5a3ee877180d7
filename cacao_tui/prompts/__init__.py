"""Prompt templates as text files. A prompt change is a text diff.

Templates use ``string.Template`` placeholders (``$name`` / ``${name}``) so CUDA braces
need no escaping; a literal dollar sign is written ``$$``.
"""

from __future__ import annotations

import re
import string
from functools import cache
from importlib import resources


@cache
def load(name: str) -> str:
    return (resources.files(__package__) / f"{name}.txt").read_text(encoding="utf-8")


def render(template: str, /, **values: object) -> str:
    """Fill a template; a missing placeholder is a bug and raises KeyError. Sections left empty
    leave no run of blank lines behind (at most one blank line between two parts)."""
    return tidy(string.Template(load(template)).substitute({k: str(v) for k, v in values.items()}))


def tidy(text: str) -> str:
    """``text`` with runs of blank lines made one, outside fenced blocks (inside one, a kernel or a
    spec, every line is kept as it is)."""
    parts = text.split("```")
    return "```".join(_BLANK_RUNS.sub("\n\n", p) if i % 2 == 0 else p for i, p in enumerate(parts))


_BLANK_RUNS = re.compile(r"\n(?:[ \t]*\n){2,}")
