"""Text from files, the model or a directory name, made safe to print on a terminal: the one helper.

Printed raw, an escape sequence drives the terminal (``\\x1b]0;...`` retitles it, ``\\x1b[2J``
clears it), a NUL or a C1 control (``\\x9b`` is CSI on some terminals) corrupts it, U+202E
reverses the text after it, and a line break in a name forges a line of output. ``safe_text``
shows every such character as a visible escape instead (``\\x1b``, ``\\u202e``, ``\\n``). It
lives here, below both packages, so that ktt's messages, cacao_tui's store and CLI lines and
the app (``cacao_tui.ui.formatting`` re-exports it) all use the same one.
"""

from __future__ import annotations


def escape_char(char: str) -> str:
    """One character as a visible escape: ``\\x1b``, ``\\u202e``, ``\\U0001f600``."""
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def safe_text(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` with every control, format (bidi) and separator character shown as an escape.

    Printable text is returned unchanged (the same object). With ``keep_newlines`` a line
    break and a tab stay as they are (a multi-line message, a kernel's source), a CR before a
    line break is dropped (CRLF files), everything else is escaped.
    """
    if text.isprintable():
        return text
    if not keep_newlines:
        return "".join(c if c.isprintable() else escape_char(c) for c in text)
    # Line by line: a kernel of 512 KiB is mostly printable lines, checked at C speed.
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.isprintable():
            continue
        if line.endswith("\r") and i < len(lines) - 1:
            line = line[:-1]
        if not line.replace("\t", "").isprintable():
            line = "".join(c if c.isprintable() or c == "\t" else escape_char(c) for c in line)
        lines[i] = line
    return "\n".join(lines)


def safe_line(text: object, limit: int | None = None) -> str:
    """``str(text)`` as one terminal-safe line (line breaks escaped too), cut to ``limit`` characters."""
    out = safe_text(str(text))
    return out if limit is None or len(out) <= limit else out[: limit - 1] + "…"
