"""A vertical scroll area with vi keys, for long read-only content (kernel source, LLM calls)."""

from __future__ import annotations

from textual.containers import VerticalScroll

from cacao_tui.ui import keymap


class ScrollPane(VerticalScroll):
    BINDINGS = keymap.bindings(keymap.SCROLL)
