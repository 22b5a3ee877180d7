"""``cacao`` without ``--dir``: the home screen, and the run views it opens, until the user
quits. Each is its own Textual app, run one after the other in the same terminal; the
runs themselves are separate processes and are not touched when the app quits."""

from __future__ import annotations

import gc
from pathlib import Path

from cacao_tui.ui.home.attach import AttachApp
from cacao_tui.ui.home.home_app import HomeApp
from cacao_tui.ui.sigterm import EXIT_SIGTERM


def run_home(folder: Path) -> int:
    """0 when the user quit; EXIT_SIGTERM when SIGTERM ended a view (no further view opens)."""
    select: Path | None = None
    while True:
        home = HomeApp(folder, select)
        choice = home.run()
        if home.sigterm_received:
            return EXIT_SIGTERM
        if choice is None:
            return 0
        select = choice.problem_dir
        view = AttachApp(choice.problem_dir, choice.started)
        view.run()
        gc.unfreeze()  # the run view froze its objects for its lifetime (MainScreen.seed)
        if view.sigterm_received:
            return EXIT_SIGTERM
