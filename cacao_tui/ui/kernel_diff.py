"""A coloured unified diff of two kernel sources, built on difflib and rich.Text."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from rich.text import Text

STYLES = {"+": "green", "-": "red", "@": "bold cyan", "h": "bold"}


@dataclass(frozen=True)
class KernelDiff:
    text: Text
    added: int
    removed: int

    @property
    def summary(self) -> str:
        return f"+{self.added} −{self.removed}"


def kernel_diff(old: str, new: str, old_label: str, new_label: str, context: int = 3) -> KernelDiff:
    lines = difflib.unified_diff(
        old.splitlines(), new.splitlines(), fromfile=old_label, tofile=new_label, lineterm="", n=context
    )
    out = Text(no_wrap=True, overflow="ellipsis")
    added = removed = 0
    for line in lines:
        if line.startswith(("+++", "---")):
            style = STYLES["h"]
        elif line.startswith("+"):
            style, added = STYLES["+"], added + 1
        elif line.startswith("-"):
            style, removed = STYLES["-"], removed + 1
        elif line.startswith("@@"):
            style = STYLES["@"]
        else:
            style = ""
        out.append(line.expandtabs(4) + "\n", style=style)
    if not out:
        out.append("(no differences)", style="dim")
    return KernelDiff(out, added, removed)
