"""A code editor for references and custom initialisers, highlighted with tree-sitter where installed.

CUDA has no grammar of its own here: it is C++ with a few keywords, so it uses the C++ grammar
with the C highlight query followed by the C++ one (the C++ query only adds to C's, as editors
that ship both do). Without the tree-sitter packages the editor still works, unhighlighted.
"""

from __future__ import annotations

import contextlib
from functools import cache
from typing import Any

from textual.widgets import TextArea

# reference type (or "cpp" for init bodies) -> (language name in the TextArea, grammar module, query modules)
GRAMMARS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "cuda": ("cuda", "tree_sitter_cpp", ("tree_sitter_c", "tree_sitter_cpp")),
    "cpp": ("cuda", "tree_sitter_cpp", ("tree_sitter_c", "tree_sitter_cpp")),
    "cpu_c": ("c", "tree_sitter_c", ("tree_sitter_c",)),
    "python": ("python", "tree_sitter_python", ("tree_sitter_python",)),
}


@cache
def _grammar(kind: str) -> tuple[str, Any, str] | None:
    """(name, tree_sitter.Language, highlight query), or None where the packages are missing."""
    import importlib

    name, module, query_modules = GRAMMARS[kind]
    try:
        from tree_sitter import Language, Query

        language = Language(importlib.import_module(module).language())
        query = "\n".join(importlib.import_module(m).HIGHLIGHTS_QUERY for m in query_modules)
        Query(language, query)  # a query the grammar cannot run would fail later, on every keystroke
    except Exception:  # ImportError, an ABI mismatch, a query for another grammar version
        return None
    return name, language, query


def highlighting_available(kind: str) -> bool:
    return _grammar(kind) is not None


class CodeEditor(TextArea):
    """A TextArea in code-editor mode whose language follows the reference type."""

    def __init__(self, text: str = "", *, kind: str = "cuda", **kwargs: Any) -> None:
        super().__init__(
            text,
            soft_wrap=False,
            tab_behavior="indent",
            show_line_numbers=True,
            theme="css",
            **kwargs,
        )
        self.set_kind(kind)

    def set_kind(self, kind: str) -> None:
        grammar = _grammar(kind) if kind in GRAMMARS else None
        if grammar is None:
            self.language = None
            return
        name, language, query = grammar
        if name not in self._languages:
            self.register_language(name, language, query)
        with contextlib.suppress(Exception):
            self.language = name
