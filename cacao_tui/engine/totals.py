"""The run's LLM totals after ``--resume``: read back from the call records of the earlier part.

Every call was recorded as a JSON file (``llm/<node>_<index>.json`` beside the iteration
that made it). On --resume the tokens, cost and call count of those records seed the
tracked LLM's totals, so the status bar, final_results.json and ``--budget-usd`` go on from
where the run was, not from zero. Records of a step that a crash interrupted were moved
to ``llm/superseded/`` before the step was redone, and those of deleted branches moved to
``trash/`` with their branch: both still count (the calls were made). The budget cap of
the earlier run (context.json) applies again unless the resume sets its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from cacao_tui.llm.recording import CallRecord
from cacao_tui.nodes.context import RunDeps
from cacao_tui.store.atomic import StateFileError, read_model_or_none
from cacao_tui.store.state import Context
from ktt.capped_read import read_bytes_capped

_RECORD = re.compile(r"^.+_\d{3,}\.json\Z")
MAX_RECORD_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Restored:
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    budget_usd: float | None = None
    unreadable: int = 0


def record_paths(output: Path) -> list[Path]:
    """Every call record of a run: in llm/ folders at any depth, including llm/superseded/."""
    found = []
    for p in output.rglob("*.json"):
        rel = p.relative_to(output).parts
        if rel[0].startswith("earlier_"):  # an earlier run kept by --no-clean (store/earlier_run.py)
            continue
        if "llm" in rel[:-1] and _RECORD.match(p.name) and p.is_file():
            found.append(p)
    return sorted(found)


def restore_totals(deps: RunDeps) -> Restored:
    usage = deps.llm.usage
    unreadable = 0
    for path in record_paths(deps.layout.output):
        try:
            record = CallRecord.model_validate_json(read_bytes_capped(path, MAX_RECORD_BYTES, follow_links=False))
        except (OSError, ValueError, ValidationError):
            unreadable += 1
            continue
        usage.add(record.branch, record.iteration, record.node, record.usage, failed=record.response is None)
    if deps.settings.budget_usd is None:
        try:
            context = read_model_or_none(deps.layout.context, Context)
        except StateFileError:
            context = None
        if context is not None and context.settings.budget_usd is not None:
            deps.settings.budget_usd = context.settings.budget_usd
            deps.llm.budget_usd = context.settings.budget_usd
    run = usage.run
    return Restored(
        llm_calls=run.calls,
        input_tokens=run.input_tokens,
        output_tokens=run.output_tokens,
        cost_usd=run.cost_usd,
        budget_usd=deps.llm.budget_usd,
        unreadable=unreadable,
    )
