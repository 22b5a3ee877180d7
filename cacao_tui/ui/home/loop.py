"""``cacao`` without ``--dir``: the home screen, and the run views it opens, until the user
quits. Each is its own Textual app, run one after the other in the same terminal; the
runs themselves are separate processes and are not touched when the app quits."""

from __future__ import annotations

import gc
from pathlib import Path

from cacao_tui.ui.home.attach import AttachApp
from cacao_tui.ui.home.home_app import HomeApp


def run_home(folder: Path) -> int:
    select: Path | None = None
    while True:
        choice = HomeApp(folder, select).run()
        if choice is None:
            return 0
        select = choice.problem_dir
        AttachApp(choice.problem_dir, choice.started).run()
        gc.unfreeze()  # the run view froze its objects for its lifetime (MainScreen.seed)
