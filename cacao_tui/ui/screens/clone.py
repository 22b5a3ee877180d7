"""The clone dialog: copy a problem's definition (not its runs) to a sibling directory."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from cacao_tui.ui import keymap
from cacao_tui.ui.formatting import fit_path
from ktt.problem.errors import display_path


def suggested_name(source: Path) -> str:
    """``name_v2`` (or v3, ...): the first that is free beside the problem, in the clone's
    alphabet (lowercase letters, digits and '_', as the original's --clone)."""
    base = re.sub(r"[^a-z0-9_]+", "_", source.name.lower()).strip("_") or "problem"
    k = 2
    while (source.parent / f"{base}_v{k}").exists():
        k += 1
    return f"{base}_v{k}"


class CloneScreen(ModalScreen[Path | None]):
    """Dismissed with the new directory, or None when cancelled."""

    BINDINGS = keymap.bindings(keymap.FORM)

    def __init__(self, source: Path) -> None:
        super().__init__(classes="dialog-screen")
        self._source = source

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog form", id="clone"):
            yield Static(f"Clone {self._source.name}", classes="dialog-title")
            where = fit_path(display_path(self._source), 56)
            yield Static(f"Copies {where}\nwithout output/ and archive/ (its runs).", classes="dialog-text")
            yield Label("New name (a directory beside it)")
            # The suggestion is the field's value, not a placeholder: Enter takes what it shows.
            yield Input(suggested_name(self._source), id="clone-name")
            yield Static("", classes="form-errors", id="clone-errors")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Clone", variant="primary", id="clone-go")
                yield Button("Cancel (esc)", id="clone-cancel")

    def on_mount(self) -> None:
        self.query_one("#clone-name", Input).focus()

    @on(Input.Submitted, "#clone-name")
    @on(Button.Pressed, "#clone-go")
    def _go(self) -> None:
        self.clone()

    @on(Button.Pressed, "#clone-cancel")
    def _cancel(self) -> None:
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)

    @work(exclusive=True, group="clone")
    async def clone(self) -> None:
        from cacao_tui.store.clone import CloneError, clone_problem

        name = self.query_one("#clone-name", Input).value.strip()
        errors = self.query_one("#clone-errors", Static)
        try:
            done = await asyncio.to_thread(clone_problem, self._source, name)
        except (CloneError, OSError) as exc:
            errors.update(f"✗ {str(exc).removeprefix('--clone: ')}")  # the dialog's words, not the flag's
            return
        self.app.notify(f"Copied {done.files} file(s) to {done.target}", timeout=8)
        self.dismiss(done.target)
