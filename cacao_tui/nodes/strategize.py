"""Strategize: the master proposes 1 to N distinct strategies; each becomes a root branch.

The prompt asks for directions that differ in algorithm or hardware use (never a tuning
parameter), at least one that does less work when the analysis says the work can shrink, and
no more than are worth a branch (the run's iteration pool is shared by all of them).
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from cacao_tui import prompts
from cacao_tui.llm import CallContext, Message
from cacao_tui.nodes.briefing import problem_brief
from cacao_tui.nodes.context import RunDeps
from cacao_tui.store.state import Strategy


class StrategyList(BaseModel):
    strategies: list[Strategy] = Field(description="1 to N distinct strategies, most promising first")


def slug(name: str, fallback: str) -> str:
    text = re.sub(r"[^A-Za-z0-9_-]+", "-", name.strip().lower()).strip("-_")
    return (text or fallback)[:24].rstrip("-_") or fallback


async def strategize(deps: RunDeps, analysis: str, n: int) -> list[Strategy]:
    text = prompts.render("strategize", problem=problem_brief(deps), analysis=analysis, n=n)
    result = await deps.llm.structured(
        [Message(role="user", content=text)],
        StrategyList,
        ctx=CallContext(branch=None, iteration=None, node="strategize"),
        system=prompts.load("system"),
    )
    strategies: list[Strategy] = []
    seen: set[str] = set()
    for i, s in enumerate(result.strategies[:n]):
        name = slug(s.name, f"s{i + 1}")
        while name in seen:
            name = f"{name}-{i + 1}"
        seen.add(name)
        strategies.append(Strategy(name=name, title=s.title.strip() or name, description=s.description.strip()))
    return strategies
