"""What an iteration changed: its kernels.cu and tuning.yaml against the files it started from.

Decide checks a proposal's claims against the code (a padding the kernel already has, a
register count a change will raise), so it sees the change itself: a unified diff against
the iteration's start, or the whole file where there was no start or the diff would be the
longer text.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from cacao_tui.nodes.briefing import clip
from cacao_tui.nodes.context import BranchView, RunDeps
from cacao_tui.nodes.workspace import read_model_file

CONTEXT_LINES = 2


def _read(path: Path) -> str | None:
    try:
        return read_model_file(path) if path.is_file() else None
    except OSError:
        return None


def file_change(name: str, before: str | None, after: str | None, limit: int) -> str:
    lang = "cuda" if name.endswith(".cu") else "yaml"
    if after is None:
        return f"{name}: not written"
    if before is None:
        return f"{name} (new):\n```{lang}\n{clip(after, limit, 'file')}\n```"
    if before == after:
        return f"{name}: unchanged"
    diff = "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True), after.splitlines(keepends=True), f"start/{name}", name, n=CONTEXT_LINES
        )
    )
    if len(diff) >= len(after):
        return f"{name} (rewritten):\n```{lang}\n{clip(after, limit, 'file')}\n```"
    return f"{name} (diff against the start):\n```diff\n{clip(diff, limit, 'diff')}\n```"


def changes_section(deps: RunDeps, branch: BranchView) -> str:
    """The iteration's change, file by file; empty when it wrote no kernel (a failed step says so)."""
    it = branch.it
    kernel, spec = _read(it.kernel), _read(it.spec)
    if kernel is None and spec is None:
        return ""
    start = branch.start
    where = f" (it started from {start.label})" if start is not None else " (the branch's first files)"
    limit = deps.defaults.source_chars
    parts = [
        file_change("kernels.cu", start.kernel if start else None, kernel, limit),
        file_change("tuning.yaml", start.spec if start else None, spec, limit),
    ]
    return f"This iteration's files{where}:\n" + "\n".join(parts) + "\n"
