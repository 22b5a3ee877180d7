"""Colours that mean the same in a 16-colour terminal as in a true-colour one.

Textual draws a Rich colour name (``yellow``, ``red``) through its ANSI theme (Monokai) in true
colour, and in a 16-colour terminal turns that back into the nearest of the 16: Monokai's
orange "yellow" comes back as bright red and its pink "red" as magenta, so a step in progress
looked like an error. In such a terminal the apps use the terminal's own ANSI colours instead
(Textual's ``ansi_color``), so ``yellow`` is the terminal's yellow. Under NO_COLOR nothing
changes: greys only, as Textual draws them.
"""

from __future__ import annotations

import io
import os
from typing import Any

from rich.console import Console


def sixteen_colours(environ: dict[str, str] | None = None) -> bool:
    """Whether the terminal described by the environment has only the 16 ANSI colours."""
    env = dict(os.environ if environ is None else environ)
    if "NO_COLOR" in env:
        return False
    console = Console(file=io.StringIO(), force_terminal=True, _environ=env)
    return console.color_system == "standard"


class TerminalColours:
    """Mixin of the apps (before ``App`` in the bases): native ANSI colours in a 16-colour terminal."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if "ansi_color" not in kwargs and sixteen_colours():
            kwargs["ansi_color"] = True
        super().__init__(*args, **kwargs)
