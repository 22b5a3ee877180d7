"""The engine's answers to a model that gives nothing usable (issue 20): a rule-based decision,
fewer or default strategies, a refused plan as a failed step, a repeating tool loop ended —
with the scripted FAKE model and the FAKE tuner, so results can improve or not."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

from cacao_tui.engine.events import LogLine
from cacao_tui.store.atomic import read_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import IterState, MasterState
from tests.engine.conftest import make_engine
from tests.engine.scenario import Scenario


def state(problem: Path, branch: str, index: int) -> IterState:
    return read_model(RunLayout(problem).branch(branch).iteration(index).state, IterState)


def with_answers(scenario: Scenario, answers: dict[str, object]) -> Scenario:
    """The scenario, with these nodes answered by fixed replies instead."""
    original = scenario.respond

    def respond(request):  # type: ignore[no-untyped-def]
        if request.key.node in answers:
            scenario.calls.append((request.key.branch, request.key.iteration, request.key.node, request.key.index))
            answer = answers[request.key.node]
            return answer(request) if callable(answer) else answer
        return original(request)

    scenario.respond = respond  # type: ignore[method-assign]
    return scenario


def test_no_usable_decision_continues_while_improving_then_stops(mmul_dir: Path) -> None:
    times = {1: 3.0, 2: 2.0, 3: 2.5}  # better, then worse
    scenario = with_answers(Scenario(strategies=["alpha"], time_ms=lambda b, i: times.get(i, 9.0)),
                            {"decide": "I think we should keep going, probably."})  # fmt: skip
    engine = make_engine(mmul_dir, scenario.provider(), max_iter=5, n_strategies=1)
    finished = asyncio.run(engine.run())
    assert finished.status == "ok", finished
    decisions = [state(mmul_dir, "b1-alpha", i).decision for i in (1, 2, 3)]
    assert [d.action for d in decisions] == ["continue", "continue", "stop"]  # type: ignore[union-attr]
    assert all(d.fallback and d.automatic and d.reason.startswith("rule-based fallback") for d in decisions)  # type: ignore[union-attr]
    assert "no improvement" in decisions[2].reason  # type: ignore[union-attr]
    assert decisions[0].feedback.startswith("proposal for b1-alpha #1")  # the model's own proposal carries on
    # One repair turn per decision, then the rule: two decide calls per iteration.
    assert sum(1 for c in scenario.calls if c[2] == "decide") == 6


def test_a_failed_iteration_is_retried_once_then_the_branch_stops(mmul_dir: Path) -> None:
    scenario = with_answers(Scenario(strategies=["alpha"]), {"decide": "{}", "author": "I will not use tools."})
    engine = make_engine(mmul_dir, scenario.provider(), max_iter=5, n_strategies=1)
    assert asyncio.run(engine.run()).status in ("ok", "failed")
    first, second = state(mmul_dir, "b1-alpha", 1), state(mmul_dir, "b1-alpha", 2)
    assert first.error and first.decision is not None and first.decision.action == "retry"
    assert "failed" in first.decision.feedback
    assert second.error and second.decision is not None and second.decision.action == "stop"
    assert "two failures in a row" in second.decision.reason
    assert not RunLayout(mmul_dir).branch("b1-alpha").iteration(3).state.exists()


def test_strategies_that_validate_are_kept_else_a_default_one(mmul_dir: Path, tmp_path: Path) -> None:
    good = {"name": "tiles", "title": "Tiles", "description": "tile it"}
    broken = json.dumps({"strategies": [good, {"title": "no name"}]})
    scenario = with_answers(Scenario(), {"strategize": broken})
    engine = make_engine(mmul_dir, scenario.provider(), max_iter=1, n_strategies=3)
    asyncio.run(engine.run())
    master = read_model(RunLayout(mmul_dir).master, MasterState)
    assert [s.name for s in master.strategies] == ["tiles"]
    assert master.fallbacks == [
        "strategize: kept the 1 strategies of the reply that validate (the JSON does not match the schema: "
        "strategies.1.name: Field required; strategies.1.description: Field required)"
    ]

    other = tmp_path / "other"
    shutil.copytree(mmul_dir, other, ignore=shutil.ignore_patterns("output", "archive"))
    scenario = with_answers(Scenario(), {"strategize": "I'm sorry, I can't help with that."})
    events = []
    engine = make_engine(other, scenario.provider(), max_iter=1, n_strategies=3)
    engine.bus.subscribe(events.append)
    assert asyncio.run(engine.run()).status in ("ok", "failed")
    master = read_model(RunLayout(other).master, MasterState)
    assert [s.name for s in master.strategies] == ["baseline"] and "default strategy" in master.fallbacks[0]
    assert any(isinstance(e, LogLine) and "default strategy" in e.message for e in events)
    # The refusal was asked again once with the task restated before the fallback.
    assert [c[2:] for c in scenario.calls if c[2] == "strategize"] == [("strategize", 0), ("strategize", 1),
                                                                        ("strategize", 2)]  # fmt: skip


def test_a_refused_plan_is_a_failed_step_never_the_plan(mmul_dir: Path) -> None:
    scenario = with_answers(Scenario(strategies=["alpha"]), {"plan": "I'm sorry, but I cannot help with that."})
    engine = make_engine(mmul_dir, scenario.provider(), max_iter=2, n_strategies=1)
    asyncio.run(engine.run())
    first = state(mmul_dir, "b1-alpha", 1)
    assert first.plan is None and first.error and first.error.startswith("planning failed")
    assert "refused" in first.error and first.decision is not None
    assert [c[3] for c in scenario.calls if c[:3] == ("b1-alpha", 1, "plan")] == [0, 1]  # asked again once


def test_a_tool_loop_that_repeats_itself_is_told_then_ended(mmul_dir: Path) -> None:
    def author(branch: str, iteration: int, index: int) -> dict | None:
        if index == 0:
            return None  # the scenario's files and check
        return {"tool_calls": [{"id": f"r{index}", "name": "read_file", "arguments": {"path": "kernels.cu"}}]}

    scenario = Scenario(strategies=["alpha"], author_script=author)
    engine = make_engine(mmul_dir, scenario.provider(), max_iter=1, n_strategies=1)
    asyncio.run(engine.run())
    outcome = state(mmul_dir, "b1-alpha", 1).author
    assert outcome is not None and outcome.ok
    assert "repeated read_file with the same arguments 4 times" in (outcome.message or "")
    assert outcome.tool_calls == 7  # 3 of the first turn, then 4 reads: not 50 (the cap)
    told = [r for r in scenario.requests if r.key.node == "author" and r.key.index == 4]
    assert "made this exact read_file call 3 times" in told[0].messages[-1].content
