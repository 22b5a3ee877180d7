"""The problem's YAML as text, for a problem whose problem.yaml or inputs.yaml does not load: the
editor's fields cannot show what does not parse, so its text is fixed here first.

Each file is checked as it is typed (it must parse as a YAML mapping, the editor's minimum);
``ctrl+s`` writes both, each atomically, under the problem's run lock (a live run refuses), and
the editor opens on the fixed problem. ``Esc`` leaves without writing (it asks when edited).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Button, Label, Static, TextArea

from cacao_tui.store.atomic import write_text_atomic
from cacao_tui.store.run_lock import RunLocked, acquire_run_lock, lock_path
from cacao_tui.ui import keymap
from cacao_tui.ui.editor.actions import save_cancel
from cacao_tui.ui.formatting import safe_text
from cacao_tui.ui.screens.dialogs import ConfirmScreen
from ktt.problem import ProblemError
from ktt.problem.yaml_io import parse_yaml_mapping, read_yaml_text

FILES = ("problem.yaml", "inputs.yaml")
RAW_KEYS: tuple[keymap.Key, ...] = (
    keymap.Key("ctrl+s", "save", "save", "Write the two files (once both parse) and open the editor",
               display="ctrl+s", priority=True),
    keymap.Key("escape", "cancel", "cancel", "Leave without writing (asks when edited)", display="esc"),
)  # fmt: skip


class RawYamlScreen(Screen[bool | None]):
    """Dismissed with True once the files were written, None when left unchanged."""

    BINDINGS = keymap.bindings(RAW_KEYS)
    DEFAULT_CSS = """
    RawYamlScreen #raw-title { height: 1; }
    RawYamlScreen #raw-why { height: auto; color: $error; padding: 0 1; }
    RawYamlScreen Label { color: $text-muted; padding: 0 1; }
    RawYamlScreen TextArea { height: 1fr; }
    RawYamlScreen #raw-status { height: auto; max-height: 3; padding: 0 1; }
    RawYamlScreen #raw-status.-ok { color: $success; }
    RawYamlScreen #raw-status.-error { color: $error; }
    RawYamlScreen #raw-actions { height: 1; }
    RawYamlScreen #raw-actions Button { margin-right: 2; }
    """

    def __init__(self, directory: Path, why: str) -> None:
        super().__init__()
        self.directory = directory
        self.why = why
        self.texts: dict[str, str] = {}
        for name in FILES:
            path = directory / name
            if path.is_file():
                try:
                    self.texts[name] = read_yaml_text(path)
                except ProblemError as exc:  # unreadable (too large, not text): shown, not editable
                    self.why += f"\n{exc.line()}"
        self.original = dict(self.texts)

    def compose(self) -> ComposeResult:
        yield Static(safe_text(f"Fix the YAML · {self.directory}"), id="raw-title", classes="pane-header")
        yield Static(safe_text(f"✗ {self.why}\nThe editor's fields need files that load; fix the text here.",
                               keep_newlines=True), id="raw-why")  # fmt: skip
        with Vertical():
            for name, text in self.texts.items():
                yield Label(name)
                yield TextArea(text, language="yaml", id=f"raw-{name.split('.')[0]}", show_line_numbers=True)
        yield from save_cancel("raw")

    def on_mount(self) -> None:
        self._check()

    def _areas(self) -> dict[str, TextArea]:
        return {name: self.query_one(f"#raw-{name.split('.')[0]}", TextArea) for name in self.texts}

    @on(TextArea.Changed)
    def _edited(self) -> None:
        self._check()

    def _check(self) -> str | None:
        """The first file that does not parse, as its one line; None when both do."""
        status = self.query_one("#raw-status", Static)
        for name, area in self._areas().items():
            try:
                parse_yaml_mapping(area.text, self.directory / name)
            except ProblemError as exc:
                status.update(safe_text(f"✗ {exc.line()}"))
                status.set_classes("-error")
                return exc.line()
        status.update("✓ both files parse: ctrl+s writes them and opens the editor")
        status.set_classes("-ok")
        return None

    def action_save(self) -> None:
        if self._check() is not None:
            return
        had_lock_file = lock_path(self.directory).exists() or lock_path(self.directory).is_symlink()
        try:
            lock = acquire_run_lock(self.directory, command="cacao (the problem editor, fixing its YAML)")
        except RunLocked as exc:
            self.query_one("#raw-status", Static).update(safe_text(f"✗ not saved: {exc}"))
            return
        try:
            for name, area in self._areas().items():
                if area.text != self.original.get(name):
                    write_text_atomic(self.directory / name, area.text)
        except OSError as exc:
            self.query_one("#raw-status", Static).update(safe_text(f"✗ not saved: {exc.strerror or exc}"))
            return
        finally:
            if not had_lock_file:  # a never-run problem keeps only its definition (as the editor's save)
                with contextlib.suppress(OSError):
                    os.unlink(lock_path(self.directory))
            lock.release()
        self.dismiss(True)

    @on(Button.Pressed, "#raw-save")
    def _save_pressed(self) -> None:
        self.action_save()

    @on(Button.Pressed, "#raw-cancel")
    def action_cancel(self) -> None:
        if all(area.text == self.original.get(name) for name, area in self._areas().items()):
            self.dismiss(None)
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.dismiss(None)

        self.app.push_screen(ConfirmScreen("Leave without saving?", "Your changes to the YAML are lost.",
                                           yes="Discard"), answered)  # fmt: skip
