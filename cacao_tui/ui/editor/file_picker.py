"""Pick a data file from disk for an ``init: file`` buffer: a directory tree and a path box."""

from __future__ import annotations

from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, DirectoryTree, Input, Static

from cacao_tui.ui import keymap

PICKER_KEYS: tuple[keymap.Key, ...] = (keymap.Key("escape", "close", "cancel", "Cancel", display="esc"),)


class FilePickScreen(ModalScreen[Path | None]):
    """Dismissed with the chosen file (a regular file that exists), or None."""

    BINDINGS = keymap.bindings(PICKER_KEYS)

    def __init__(self, start: Path, purpose: str) -> None:
        super().__init__(classes="dialog-screen")
        self._start = start if start.is_dir() else Path.home()
        self._purpose = purpose

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog form", id="file-picker"):
            yield Static(self._purpose, classes="dialog-title")
            yield DirectoryTree(self._start, id="picker-tree")
            yield Input(placeholder="or type a path and press Enter", id="picker-path")
            yield Static("", classes="form-errors", id="picker-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Use this file", variant="primary", id="picker-ok")
                yield Button("Cancel (esc)", id="picker-cancel")

    def on_mount(self) -> None:
        self.query_one("#picker-path", Input).focus()

    @on(DirectoryTree.FileSelected)
    def _selected(self, event: DirectoryTree.FileSelected) -> None:
        self.query_one("#picker-path", Input).value = str(event.path)

    @on(Input.Submitted, "#picker-path")
    @on(Button.Pressed, "#picker-ok")
    def _ok(self) -> None:
        text = self.query_one("#picker-path", Input).value.strip()
        path = Path(text).expanduser()
        if not text or not path.is_file():
            self.query_one("#picker-error", Static).update(f"✗ {text or 'no file chosen'}: not a file")
            return
        self.dismiss(path.resolve())

    @on(Button.Pressed, "#picker-cancel")
    def action_close(self) -> None:
        self.dismiss(None)
