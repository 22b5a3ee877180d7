"""What ``--check`` warns about beyond the loader's warnings.

- A reference that is still the editor's stub (problem/writer.py): it compiles, and fails loudly
  when run (a trap, ``abort()``, ``NotImplementedError``). A run refuses it before anything is
  written or any model is asked.
- A measured reference time (output/reference_time.json) whose timed calls spread more than
  ``SPREAD_WARN`` of their median: every speedup shares that denominator.
"""

from __future__ import annotations

from cacao_tui.problem.writer import is_reference_stub
from ktt.capped_read import MAX_SOURCE_BYTES, read_text_capped
from ktt.problem import Problem
from ktt.problem.errors import display_path
from ktt.reference_times import SPREAD_WARN, ReferenceTimes

STUB_WHAT = "the reference is still the editor's stub: it fails when run; write it first"


def stub_reference(problem: Problem) -> bool:
    """True when the reference file still holds a stub's failing line (an unreadable file is the
    loader's and the preflight's to report, not this check's)."""
    try:
        text = read_text_capped(problem.reference.file, MAX_SOURCE_BYTES)
    except (OSError, UnicodeDecodeError):
        return False
    return is_reference_stub(text)


def check_warnings(problem: Problem, times: ReferenceTimes) -> list[str]:
    """The warnings ``--check`` adds to the loader's: a stub reference, a widely spread baseline."""
    out = [f"{display_path(problem.reference.file)}: {STUB_WHAT}"] if stub_reference(problem) else []
    for shape in problem.shapes:
        ref = times.get(shape.name)
        if ref.spread is not None and ref.spread > SPREAD_WARN:
            out.append(
                f"output/reference_time.json: {shape.name}: {ref.describe()}: every speedup of this shape "
                "shares it; remove the value to time it again on a quiet machine"
            )
    return out
