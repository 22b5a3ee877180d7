"""The problem editor: ``ProblemEditorScreen(directory, new=False)`` (a stable entry point for
other screens) and ``EditorApp`` to run it on its own."""

from __future__ import annotations

from pathlib import Path

from textual.app import App
from textual.screen import Screen

from cacao_tui.ui.editor.screen import ProblemEditorScreen
from cacao_tui.ui.palette import OwnPalette
from cacao_tui.ui.terminal_colours import TerminalColours

__all__ = ["EditorApp", "ProblemEditorScreen"]


class EditorApp(OwnPalette, TerminalColours, App[Path | None]):
    """The editor alone: returns the saved directory, or None when cancelled."""

    CSS_PATH = "../cacao.tcss"
    TITLE = "cacao problem editor"

    def __init__(self, directory: Path, *, new: bool = False) -> None:
        super().__init__()
        self.directory = directory
        self.new = new

    def get_default_screen(self) -> Screen:
        return Screen()

    def on_mount(self) -> None:
        self.push_screen(ProblemEditorScreen(self.directory, new=self.new), self.exit)
