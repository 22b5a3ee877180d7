"""Deleting a problem from the home screen moves it to ``<folder>/.trash/``: nothing is lost,
and putting it back is one ``mv``."""

from __future__ import annotations

import os
import time
from pathlib import Path

from cacao_tui.runs.catalog import TRASH
from cacao_tui.runs.liveness import live_run


class TrashError(Exception):
    """The problem cannot be moved; ``str()`` is the one line to show."""


def move_to_trash(problem_dir: Path) -> Path:
    """Rename the problem into its folder's trash (one rename: it is either here or there)."""
    live = live_run(problem_dir)
    if live is not None:
        raise TrashError(f"{problem_dir}: a run is using it ({live.describe()}); stop it first")
    trash = problem_dir.parent / TRASH
    stamp = time.strftime("%Y%m%d-%H%M%S")
    try:
        trash.mkdir(exist_ok=True)
        target = trash / f"{problem_dir.name}-{stamp}"
        k = 2
        while target.exists():
            target = trash / f"{problem_dir.name}-{stamp}.{k}"
            k += 1
        os.rename(problem_dir, target)
    except OSError as exc:
        raise TrashError(f"{problem_dir}: cannot move to {trash}: {exc.strerror or exc}") from None
    return target
