"""Where the app's screens open the problem editor (``cacao_tui.ui.editor``), for new and edit.

``ProblemEditorScreen(directory, new=False)`` is dismissed with the saved problem directory
(saved only after it passes --check) or None (cancelled: nothing written); with ``new=True`` it
creates ``directory`` (its path is a field of the editor; the home screen and the run view's
palette propose a free name in the folder).
"""

from __future__ import annotations

from pathlib import Path

from cacao_tui.ui.editor.screen import ProblemEditorScreen


def free_name(folder: Path, stem: str = "new-problem") -> Path:
    """``folder/new-problem``, or ``-2``, ``-3``, ... when taken."""
    candidate, k = folder / stem, 2
    while candidate.exists():
        candidate, k = folder / f"{stem}-{k}", k + 1
    return candidate


def new_problem_screen(folder: Path) -> ProblemEditorScreen:
    return ProblemEditorScreen(free_name(folder), new=True)


def edit_problem_screen(problem_dir: Path) -> ProblemEditorScreen:
    return ProblemEditorScreen(problem_dir)
