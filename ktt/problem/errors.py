"""The one error a user sees for a bad problem directory: ``FILE: FIELD: what is wrong``."""

from __future__ import annotations

import os
from pathlib import Path

from ktt.terminal_text import safe_line


def display_path(path: Path | str) -> str:
    """A path as the user would type it: relative to the working directory when below it."""
    p = Path(path)
    try:
        cwd = os.getcwd()
        rel = os.path.relpath(p, cwd)
    except (ValueError, OSError):
        return str(p)
    if rel.startswith("..") or os.path.dirname(cwd) == cwd:  # outside, or the cwd is the root
        return str(p) if p.is_absolute() else os.path.normpath(os.path.join(cwd, p))
    return rel


class ProblemError(Exception):
    """A user mistake in a problem directory. ``str()`` is the one line to print."""

    def __init__(self, file: Path | str, field: str, message: str, hint: str | None = None) -> None:
        self.file = Path(file)
        self.field = field
        self.message = message
        self.hint = hint
        super().__init__(self.line())

    def line(self) -> str:
        # The path and the field name come from the file system and the file: a line break in
        # them would forge a line of output, so they are escaped; the message may hold a log.
        where = safe_line(display_path(self.file))
        field = safe_line(self.field)
        text = f"{where}: {field}: {self.message}" if self.field else f"{where}: {self.message}"
        return text

    def __str__(self) -> str:
        return self.line()
