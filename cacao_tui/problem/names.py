"""Names a user types for directories: a new problem, a clone."""

from __future__ import annotations

import re

PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
MAX_NAME = 100


def directory_name_error(name: str) -> str | None:
    """Why ``name`` is not a plain directory name (one path component, no surprises), or None."""
    if not name:
        return "empty name"
    if "/" in name or "\\" in name:
        return f"{name!r} must be a plain directory name, not a path"
    if len(name) > MAX_NAME:
        return f"{name!r} is longer than {MAX_NAME} characters"
    if not PLAIN_NAME.match(name) or name.endswith("."):
        return (
            f"{name!r} must be a plain directory name: letters, digits, '_', '-' or '.', "
            "starting with a letter or digit"
        )
    return None
