"""Merge: final_results.json from what is on disk, plus the run's token and cost totals.

The same rebuild backs ``cacao --best`` for a run that never reached its end.
"""

from __future__ import annotations

from cacao_tui.llm.usage import is_illustrative
from cacao_tui.nodes.context import RunDeps
from cacao_tui.store.atomic import write_model
from cacao_tui.store.results import rebuild_final_results
from cacao_tui.store.state import FinalResults


def write_final_results(
    deps: RunDeps, *, complete: bool, status: str | None = None, message: str | None = None
) -> FinalResults:
    """final_results.json, with the run's verdict (``status``: ok, budget, failed or interrupted, and why)."""
    final = rebuild_final_results(deps.layout)
    usage = deps.llm.usage.run
    final = final.model_copy(
        update={
            "complete": complete,
            "run_status": status,
            "run_message": message,
            "rebuilt": False,
            "dry_run": deps.settings.dry_run,
            "tokens": {"input": usage.input_tokens, "output": usage.output_tokens, "cached": usage.cached_tokens},
            "cost_usd": usage.cost_usd,
            "illustrative_usage": is_illustrative(deps.settings.provider),
        }
    )
    write_model(deps.layout.final_results, final)
    return final
