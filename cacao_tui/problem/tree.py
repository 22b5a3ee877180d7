"""The entries of a problem directory, walked within bounds (the problem editor's save copies them).

Walked without recursion, every entry looked at before anything is copied, and refused past a
bound: a problem directory is anyone's, and the save copies it whole into its staging directory.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from ktt.problem import ProblemError

MAX_SAVE_ENTRIES = 100_000  # entries of a problem directory the editor copies to save it (as --clone)
MAX_SAVE_DEPTH = 64  # directories inside each other


def _kind(mode: int) -> str | None:
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISDIR(mode):
        return "dir"
    return "file" if stat.S_ISREG(mode) else None


def problem_entries(target: Path, *, skip: Callable[[str], bool]) -> list[tuple[Path, str]]:
    """Every entry of the problem directory a save keeps (``skip``: top-level names left out), parents before
    children, walked without recursion and refused past its bounds: a FIFO, a device or a socket
    (before, a top-level FIFO was dropped from the saved problem without a word), more than
    ``MAX_SAVE_ENTRIES`` entries, or directories nested deeper than ``MAX_SAVE_DEPTH`` (a
    3,000-deep chain was a RecursionError). ProblemError, one line, before anything is written."""
    found: list[tuple[Path, str]] = []
    stack = [(target, 0)]
    while stack:
        folder, depth = stack.pop()
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            if folder == target and skip(entry.name):
                continue
            path = Path(entry.path)
            kind = _kind(entry.stat(follow_symlinks=False).st_mode)
            if kind is None:
                raise ProblemError(path, "", "is not a regular file, a directory or a link (a FIFO, a device, a "
                                             "socket); the editor cannot keep it: move it out, then save (nothing "
                                             "was written)")  # fmt: skip
            if kind == "dir":
                if depth + 1 > MAX_SAVE_DEPTH:
                    why = f"directories nested more than {MAX_SAVE_DEPTH} deep; not a problem directory"
                    raise ProblemError(path, "", f"{why} the editor saves (nothing was written)")
                stack.append((path, depth + 1))
            found.append((path.relative_to(target), kind))
            if len(found) > MAX_SAVE_ENTRIES:
                raise ProblemError(target, "", f"more than {MAX_SAVE_ENTRIES:,} entries; not a problem directory "
                                               "the editor saves (nothing was written)")  # fmt: skip
    return found
