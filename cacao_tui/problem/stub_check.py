"""Whether a problem's reference is still the editor's stub (problem/writer.py): it compiles, and
fails loudly when run (a trap, ``abort()``, ``NotImplementedError``). ``--check`` warns about it;
a run refuses it before anything is written or any model is asked."""

from __future__ import annotations

from cacao_tui.problem.writer import is_reference_stub
from ktt.capped_read import MAX_SOURCE_BYTES, read_text_capped
from ktt.problem import Problem

STUB_WHAT = "the reference is still the editor's stub: it fails when run; write it first"


def stub_reference(problem: Problem) -> bool:
    """True when the reference file still holds a stub's failing line (an unreadable file is the
    loader's and the preflight's to report, not this check's)."""
    try:
        text = read_text_capped(problem.reference.file, MAX_SOURCE_BYTES)
    except (OSError, UnicodeDecodeError):
        return False
    return is_reference_stub(text)
