"""The command palette's own entries only: Textual's generic *Keys* (its help panel of the focused
widget) is left out, since every screen's ``?`` lists this app's keys by name, and the palette
already holds each of them (issue 32: a new user found "Keys" there and nothing it explained)."""

from __future__ import annotations

from collections.abc import Iterable

from textual.app import SystemCommand
from textual.screen import Screen

TEXTUALS_OWN = ("Keys",)


class OwnPalette:
    """Mixed into each app before ``App``: drops Textual's entries that ``?`` does better."""

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        for command in super().get_system_commands(screen):  # type: ignore[misc]
            if command.title not in TEXTUALS_OWN:
                yield command
