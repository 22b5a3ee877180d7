"""The status line and the Save / Cancel row at the foot of an editor page (the problem editor,
the YAML fixer): the same keys named on the buttons, the same ids but for their prefix."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Button, Footer, Static


def save_cancel(prefix: str) -> ComposeResult:
    """``#PREFIX-status``, then ``#PREFIX-save`` and ``#PREFIX-cancel`` in ``#PREFIX-actions``, then the footer."""
    yield Static("", id=f"{prefix}-status")
    with Horizontal(id=f"{prefix}-actions"):
        yield Button("Save (ctrl+s)", variant="primary", id=f"{prefix}-save", compact=True)
        yield Button("Cancel (esc)", id=f"{prefix}-cancel", compact=True)
    yield Footer()
