"""Where the home screen finds the problem editor (``cacao_tui.ui.editor``, new and edit).

The interface agreed with the editor: ``ProblemEditorScreen(folder, problem_dir=None)``, a
screen dismissed with the saved problem directory (saved only after it passes --check)
or None (cancelled: nothing written). Until the editor is in the build, *new* opens the
new-problem form and *edit* says so.
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


def new_problem_screen(folder: Path) -> Screen:
    editor = editor_class()
    if editor is not None:
        return editor(folder)  # type: ignore[call-arg]
    from cacao_tui.ui.screens.new_problem import NewProblemScreen

    return NewProblemScreen(folder)


def edit_problem_screen(problem_dir: Path) -> Screen | None:
    editor = editor_class()
    if editor is None:
        return None
    return editor(problem_dir.parent, problem_dir)  # type: ignore[call-arg]
