"""Where the home screen finds the problem editor (``cacao_tui.ui.editor``, new and edit).

The editor's entry point: ``ProblemEditorScreen(directory, new=False)``, a screen dismissed
with the saved problem directory (saved only after it passes --check) or None (cancelled:
nothing written); with ``new=True`` it creates ``directory`` (its path is a field of the
editor; the home screen proposes a free name in the folder). Without the editor in the
build, *new* opens the new-problem form and *edit* says so.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from textual.screen import Screen

EDITOR_MODULE = "cacao_tui.ui.editor"
EDITOR_CLASS = "ProblemEditorScreen"


def editor_class() -> type[Screen] | None:
    try:
        module = importlib.import_module(EDITOR_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name is not None and EDITOR_MODULE.startswith(exc.name):
            return None
        raise
    return getattr(module, EDITOR_CLASS, None)


def free_name(folder: Path, stem: str = "new-problem") -> Path:
    """``folder/new-problem``, or ``-2``, ``-3``, ... when taken."""
    candidate, k = folder / stem, 2
    while candidate.exists():
        candidate, k = folder / f"{stem}-{k}", k + 1
    return candidate


def new_problem_screen(folder: Path) -> Screen:
    editor = editor_class()
    if editor is not None:
        return editor(free_name(folder), new=True)  # type: ignore[call-arg]
    from cacao_tui.ui.screens.new_problem import NewProblemScreen

    return NewProblemScreen(folder)


def edit_problem_screen(problem_dir: Path) -> Screen | None:
    editor = editor_class()
    if editor is None:
        return None
    return editor(problem_dir)  # type: ignore[call-arg]
