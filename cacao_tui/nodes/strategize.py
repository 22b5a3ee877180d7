"""Strategize: the master proposes 1 to N distinct strategies; each becomes a root branch.

The prompt asks for directions that differ in algorithm or hardware use (never a tuning
parameter), at least one that does less work when the analysis says the work can shrink, and
no more than are worth a branch (the run's iteration pool is shared by all of them).

A reply that does not hold a valid strategy list (after the LLM layer's repair turn), a
refusal, or a call that fails at the provider never fails the run: the strategies that do
validate are kept ("fewer"), and with none a default strategy is used, as the original
does. The result says which, so the master can record it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import BaseModel, Field, ValidationError

from cacao_tui import prompts
from cacao_tui.llm import CallContext, CallFailed, ReplyUnusable
from cacao_tui.llm.structured import StructuredOutputError, extract_json
from cacao_tui.nodes.context import RunDeps
from cacao_tui.nodes.notes import abilities
from cacao_tui.nodes.problem_brief import problem_brief
from cacao_tui.nodes.replies import opening_turn
from cacao_tui.nodes.target import target_of
from cacao_tui.store.state import Strategy

DEFAULT_STRATEGY = Strategy(
    name="baseline",
    title="Baseline optimisation",
    description=(
        "Apply the standard CUDA optimisations to the reference: coalesced global memory access, "
        "shared-memory tiling where data is reused, enough work per thread to hide latency, and a "
        "tuned block size; measure, then refine what the profile shows."
    ),
)


class StrategyList(BaseModel):
    strategies: list[Strategy] = Field(description="1 to N distinct strategies, most promising first")


@dataclass
class Strategies:
    """The strategies to start with; ``fallback`` says what was done instead of the model's
    list, when something was (None: the model's list as it came)."""

    strategies: list[Strategy]
    fallback: str | None = None


def slug(name: str, fallback: str) -> str:
    text = re.sub(r"[^A-Za-z0-9_-]+", "-", name.strip().lower()).strip("-_")
    return (text or fallback)[:24].rstrip("-_") or fallback


def salvage(text: str) -> list[Strategy]:
    """The items of a strategy list that validate one by one (the rest of the reply did not)."""
    try:
        value = extract_json(text)
    except StructuredOutputError:
        return []
    items = value.get("strategies") if isinstance(value, dict) else None
    kept = []
    for item in items if isinstance(items, list) else []:
        try:
            kept.append(Strategy.model_validate(item))
        except ValidationError:
            continue
    return kept


async def strategize(deps: RunDeps, analysis: str, n: int) -> Strategies:
    brief = problem_brief(deps)
    text = prompts.render(
        "strategize",
        problem=brief,
        analysis=analysis,
        n=n,
        max_iter=deps.settings.max_iter,
        split=" and may later split into sub-branches" if deps.settings.max_depth > 1 else " (no sub-branches)",
        abilities=abilities(deps.problem, target_of(deps).arch),
    )
    fallback = None
    try:
        result = await deps.llm.structured(
            opening_turn(text, brief),
            StrategyList,
            ctx=CallContext(branch=None, iteration=None, node="strategize"),
            system=prompts.load("system"),
        )
        proposed = result.strategies
    except (ReplyUnusable, CallFailed) as exc:
        proposed = salvage(exc.text) if isinstance(exc, ReplyUnusable) else []
        why = exc.reason if isinstance(exc, ReplyUnusable) else str(exc)
        if proposed:
            fallback = f"kept the {len(proposed)} strategies of the reply that validate ({why})"
        else:
            proposed = [DEFAULT_STRATEGY]
            fallback = f"the default strategy '{DEFAULT_STRATEGY.name}' (no usable strategy list: {why})"
    if not proposed:
        proposed = [DEFAULT_STRATEGY]
        fallback = f"the default strategy '{DEFAULT_STRATEGY.name}' (the model proposed none)"
    strategies: list[Strategy] = []
    seen: set[str] = set()
    for i, s in enumerate(proposed[:n]):
        name = slug(s.name, f"s{i + 1}")
        while name in seen:
            name = f"{name}-{i + 1}"
        seen.add(name)
        strategies.append(Strategy(name=name, title=s.title.strip() or name, description=s.description.strip()))
    return Strategies(strategies, fallback)
