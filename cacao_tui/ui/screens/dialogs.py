"""Small modal dialogs: yes/no confirmation, the quit choice, and a "please wait" box."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from cacao_tui.ui import keymap

QuitChoice = str | None  # "stop", "detach", or None to go back


class ConfirmScreen(ModalScreen[bool]):
    """Answers True (y / Yes) or False (n / Esc / No)."""

    BINDINGS = keymap.bindings(keymap.CONFIRM)

    def __init__(self, question: str, detail: str = "", yes: str = "Yes") -> None:
        super().__init__(classes="dialog-screen")
        self._question, self._detail, self._yes = question, detail, yes

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(self._question, classes="dialog-title")
            if self._detail:
                yield Static(self._detail, classes="dialog-text")
            with Horizontal(classes="dialog-buttons"):
                yield Button(f"{self._yes} (y)", variant="error", id="yes")
                yield Button("No (n)", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


class QuitScreen(ModalScreen[QuitChoice]):
    """Asked when quitting while branches still run."""

    BINDINGS = keymap.bindings(keymap.QUIT)

    def __init__(self, running: int) -> None:
        super().__init__(classes="dialog-screen")
        self._branch_count = running

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(f"{self._branch_count} branch(es) still running.", classes="dialog-title")
            yield Static(
                "Stop: every branch stops cleanly; resuming the run continues it later.\n"
                "Detach: the app closes and the run goes on, printing progress lines.",
                classes="dialog-text",
            )
            with Horizontal(classes="dialog-buttons"):
                yield Button("Stop (s)", variant="error", id="stop")
                yield Button("Detach (d)", variant="primary", id="detach")
                yield Button("Cancel (esc)", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def action_choose(self, choice: QuitChoice) -> None:
        self.dismiss(choice)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(None if event.button.id == "cancel" else event.button.id)


class BusyScreen(ModalScreen[None]):
    """A message shown while the app waits (for the engine to stop); it has no keys."""

    def __init__(self, message: str) -> None:
        super().__init__(classes="dialog-screen")
        self._message = message

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(self._message, classes="dialog-title")
