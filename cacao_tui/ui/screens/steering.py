"""Steering dialogs: a message to a branch, the iteration to revert to, the next decision.

Each only collects the answer; the main screen hands it to the engine (EngineControl),
which writes the branch's inbox. The app never writes a run file itself.
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from cacao_tui.store.state import MAX_MESSAGE_CHARS
from cacao_tui.ui import keymap


class MessageScreen(ModalScreen[str | None]):
    """Dismissed with the message text, or None when cancelled."""

    BINDINGS = keymap.bindings(keymap.FORM)

    def __init__(self, branch: str) -> None:
        super().__init__(classes="dialog-screen")
        self._branch = branch

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog form", id="message"):
            yield Static(f"Message to {self._branch}", classes="dialog-title")
            yield Static(
                "It reaches the branch's next prompts and is kept in branch.json; "
                "the next iteration plans again with it.",
                classes="dialog-text",
            )
            yield Label("Message")
            yield Input(placeholder="e.g. try TM = 16 with BN = 128", max_length=MAX_MESSAGE_CHARS, id="message-text")
            yield Static("", classes="form-errors", id="message-errors")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Send", variant="primary", id="message-send")
                yield Button("Cancel (esc)", id="message-cancel")

    def on_mount(self) -> None:
        self.query_one("#message-text", Input).focus()

    @on(Input.Submitted, "#message-text")
    @on(Button.Pressed, "#message-send")
    def _send(self) -> None:
        text = self.query_one("#message-text", Input).value
        if not text.strip():
            self.query_one("#message-errors", Static).update("✗ the message is empty")
            return
        self.dismiss(text)

    @on(Button.Pressed, "#message-cancel")
    def _cancel(self) -> None:
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)


class RevertScreen(ModalScreen[int | None]):
    """Dismissed with the iteration number to revert to, or None."""

    BINDINGS = keymap.bindings(keymap.FORM)

    def __init__(self, branch: str, suggested: int | None, choices: list[int]) -> None:
        super().__init__(classes="dialog-screen")
        self._branch, self._suggested, self._choices = branch, suggested, choices

    def compose(self) -> ComposeResult:
        listed = ", ".join(map(str, self._choices)) or "none yet"
        with Vertical(classes="dialog form", id="revert"):
            yield Static(f"Revert {self._branch}", classes="dialog-title")
            yield Static(
                "The branch continues from that iteration's kernel; the later iterations stay on disk, "
                f"marked superseded. Iterations to revert to: {listed}.",
                classes="dialog-text",
            )
            yield Label("Iteration")
            yield Input(
                value=str(self._suggested) if self._suggested is not None else "",
                type="integer",
                id="revert-iteration",
            )
            yield Static("", classes="form-errors", id="revert-errors")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Revert", variant="error", id="revert-go")
                yield Button("Cancel (esc)", id="revert-cancel")

    def on_mount(self) -> None:
        self.query_one("#revert-iteration", Input).focus()

    @on(Input.Submitted, "#revert-iteration")
    @on(Button.Pressed, "#revert-go")
    def _go(self) -> None:
        raw = self.query_one("#revert-iteration", Input).value.strip()
        if not raw.isdigit() or int(raw) < 1:
            self.query_one("#revert-errors", Static).update("✗ give an iteration number (1, 2, ...)")
            return
        self.dismiss(int(raw))

    @on(Button.Pressed, "#revert-cancel")
    def _cancel(self) -> None:
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)


class DecisionScreen(ModalScreen[str | None]):
    """Dismissed with continue / retry / branch / stop, or None."""

    BINDINGS = keymap.bindings(keymap.DECISION)

    def __init__(self, branch: str, finished: bool) -> None:
        super().__init__(classes="dialog-screen")
        self._branch, self._finished = branch, finished

    def compose(self) -> ComposeResult:
        when = (
            "The branch has finished: its last decision is replaced and the branch acts on it again."
            if self._finished
            else "The branch's next decision takes this action; the model fills in the rest (feedback, ...)."
        )
        with Vertical(classes="dialog", id="decision"):
            yield Static(f"Decision for {self._branch}", classes="dialog-title")
            yield Static(when, classes="dialog-text")
            with Horizontal(classes="dialog-buttons"):
                for action, key in (("continue", "c"), ("retry", "r"), ("branch", "b"), ("stop", "s")):
                    yield Button(f"{action.capitalize()} ({key})", id=f"decide-{action}", compact=True)
                yield Button("Cancel (esc)", id="decide-cancel", compact=True)  # five fit in 80 columns

    def on_mount(self) -> None:
        self.query_one("#decide-cancel", Button).focus()

    def action_choose(self, action: str | None) -> None:
        self.dismiss(action)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        chosen = (event.button.id or "").removeprefix("decide-")
        self.dismiss(None if chosen == "cancel" else chosen)
