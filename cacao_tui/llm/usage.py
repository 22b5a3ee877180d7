"""Running token and cost totals: per run, per branch, per (branch, iteration, node)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from cacao_tui.llm.types import Usage

NodeKey = tuple[str | None, int | None, str]
ILLUSTRATIVE = "illustrative"  # how a replay's tokens and cost are marked wherever they are shown or recorded


def is_illustrative(provider: str | None) -> bool:
    """A replay spends nothing: the tokens and cost it reports are its recording's (the demo
    sessions' are illustrative figures), never this run's spending."""
    return provider == "replay"


def cost_words(cost: str, provider: str | None) -> str:
    """A cost as shown, with the mark a replay's needs: "$1.27 (illustrative)"."""
    return f"{cost} ({ILLUSTRATIVE})" if is_illustrative(provider) else cost


# One call's tokens as an endpoint reports them: more than any context window holds is not a count.
MAX_CALL_TOKENS = 100_000_000


def call_usage(usage: Usage) -> tuple[Usage, str | None]:
    """One call's usage within what one call can use: each count in [0, MAX_CALL_TOKENS], the
    cached part within the input and the reasoning within the output; a note when the endpoint's
    figures had to change (a negative count would have given --budget-tokens back)."""
    counts = usage.model_dump(exclude={"cost_usd"})
    fixed = {k: min(max(int(v), 0), MAX_CALL_TOKENS) for k, v in counts.items()}
    fixed["cached_tokens"] = min(fixed["cached_tokens"], fixed["input_tokens"])
    fixed["cache_write_tokens"] = min(fixed["cache_write_tokens"], fixed["input_tokens"])
    fixed["reasoning_tokens"] = min(fixed["reasoning_tokens"], fixed["output_tokens"])
    if fixed == counts:
        return usage, None
    said = ", ".join(f"{k} {counts[k]:,}" for k in counts if counts[k] != fixed[k])
    return usage.model_copy(update=fixed), f"the endpoint reported impossible token counts ({said}); counted as " + (
        ", ".join(f"{k} {fixed[k]:,}" for k in counts if counts[k] != fixed[k])
    )


@dataclass
class UsageSum:
    calls: int = 0
    failed_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, usage: Usage | None, *, failed: bool = False) -> None:
        self.calls += 1
        if failed:
            self.failed_calls += 1
        if usage is None:
            return
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cached_tokens += usage.cached_tokens
        self.cache_write_tokens += usage.cache_write_tokens
        self.reasoning_tokens += usage.reasoning_tokens
        self.cost_usd += usage.cost_usd

    def as_usage(self) -> Usage:
        """The sum as one ``Usage`` (a run's totals in an event)."""
        return Usage(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cached_tokens=self.cached_tokens,
            cache_write_tokens=self.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens,
            cost_usd=self.cost_usd,
        )


@dataclass
class UsageTotals:
    """``run`` is everything; ``by_branch`` is keyed by branch name (None for the master);
    ``by_node`` by (branch, iteration, node)."""

    run: UsageSum = field(default_factory=UsageSum)
    by_branch: dict[str | None, UsageSum] = field(default_factory=dict)
    by_node: dict[NodeKey, UsageSum] = field(default_factory=dict)

    def add(self, branch: str | None, iteration: int | None, node: str, usage: Usage | None, *, failed: bool) -> None:
        self.run.add(usage, failed=failed)
        self.by_branch.setdefault(branch, UsageSum()).add(usage, failed=failed)
        self.by_node.setdefault((branch, iteration, node), UsageSum()).add(usage, failed=failed)

    @property
    def tokens(self) -> int:
        """Every token of the run so far, in and out (what --budget-tokens counts)."""
        return self.run.input_tokens + self.run.output_tokens

    def branch(self, name: str | None) -> UsageSum:
        return self.by_branch.get(name, UsageSum())

    def node(self, branch: str | None, iteration: int | None, node: str) -> UsageSum:
        return self.by_node.get((branch, iteration, node), UsageSum())

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (for final_results.json or the UI)."""
        return {
            "run": asdict(self.run),
            "branches": {("" if b is None else b): asdict(s) for b, s in self.by_branch.items()},
            "nodes": [{"branch": b, "iteration": i, "node": n, **asdict(s)} for (b, i, n), s in self.by_node.items()],
        }
