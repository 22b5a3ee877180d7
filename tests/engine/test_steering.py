"""Steering a branch: a message, a revert, a changed decision, a delete — live (queued while the
engine runs, as the app and the CLI do) and between runs (applied on --resume). The engine
runs on a scripted model and the FAKE tuner."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from cacao_tui.engine.control import (
    SteeringError,
    queue_decision,
    queue_delete,
    queue_message,
    queue_revert,
)
from cacao_tui.engine.events import BranchRemoved, EventBus, IterationStatusChanged
from cacao_tui.store.atomic import read_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import BranchConfig, BranchManifest, FinalResults, IterState
from tests.engine.conftest import make_engine
from tests.engine.scenario import Scenario
from tests.fake_tuner import FakeTuner


def run(engine) -> object:  # type: ignore[no-untyped-def]
    return asyncio.run(engine.run())


def manifest(problem: Path, name: str) -> BranchManifest:
    return read_model(RunLayout(problem).branch(name).manifest, BranchManifest)


def iteration(problem: Path, name: str, i: int) -> IterState:
    return read_model(RunLayout(problem).branch(name).iteration(i).state, IterState)


def when(status: str, branch: str, index: int, action) -> object:  # type: ignore[no-untyped-def]
    """An event hook: run ``action`` once, the first time the iteration reaches ``status``."""
    done: list[bool] = []

    def hook(event: object) -> None:
        if (
            not done
            and isinstance(event, IterationStatusChanged)
            and (event.branch, event.iteration, event.status) == (branch, index, status)
        ):
            done.append(True)
            action()

    return hook


def test_revert_between_runs_continues_from_that_kernel(mmul_dir: Path) -> None:
    scenario = Scenario(strategies=["alpha"])
    run(make_engine(mmul_dir, scenario.provider(), max_iter=4, n_strategies=1))
    layout = RunLayout(mmul_dir)
    assert manifest(mmul_dir, "b1-alpha").iterations_done == 4
    queued = queue_revert(layout, "b1-alpha", 2, default_max_iter=4)
    assert "revert to iteration 2 queued; iterations 3, 4 will be kept on disk, marked superseded" in queued.line
    engine = make_engine(mmul_dir, scenario.provider(), max_iter=4, n_strategies=1, resumed=True)
    run(engine)
    m = manifest(mmul_dir, "b1-alpha")
    assert m.superseded == [3, 4] and m.status == "done" and m.iterations_done == 4  # 1, 2, 5, 6
    assert queued.command.id in m.applied and m.applied.count(queued.command.id) == 1
    b = layout.branch("b1-alpha")
    assert b.iteration_indices() == [1, 2, 3, 4, 5, 6]
    assert iteration(mmul_dir, "b1-alpha", 3).decision is not None  # kept as it was
    st5 = iteration(mmul_dir, "b1-alpha", 5)
    assert st5.base_iteration == 2 and st5.plan  # planned again after the revert
    author = next(r for r in scenario.requests if r.key.node == "author" and r.key.iteration == 5 and r.key.index == 0)
    text = author.messages[0].content
    assert "Current files, from iteration 2 of this branch (the iteration the user reverted to)" in text
    assert "FAKE_TIME_MS: 1.0" in text  # iteration 2's kernel (2.0 / 2)
    assert "The user reverted this branch to iteration 2; iterations 3, 4 are superseded" in text


def test_revert_while_an_iteration_runs_supersedes_it(mmul_dir: Path) -> None:
    scenario = Scenario(strategies=["alpha"])
    bus = EventBus()
    layout = RunLayout(mmul_dir)
    bus.subscribe(when("running", "b1-alpha", 3, lambda: queue_revert(layout, "b1-alpha", 1, default_max_iter=4)))
    engine = make_engine(
        mmul_dir, scenario.provider(), bus=bus, max_iter=4, n_strategies=1, tuner=FakeTuner(delay_s=0.2)
    )
    run(engine)
    m = manifest(mmul_dir, "b1-alpha")
    assert m.superseded == [2, 3]
    assert iteration(mmul_dir, "b1-alpha", 3).decision is None  # abandoned where it was
    assert iteration(mmul_dir, "b1-alpha", 4).base_iteration == 1
    assert m.iterations_done == 4 and m.status == "done"  # 1, 4, 5, 6


def test_a_changed_decision_replaces_the_models_next_choice(mmul_dir: Path) -> None:
    scenario = Scenario(strategies=["alpha"], decide=lambda b, i: {"action": "stop", "reason": "model says stop"})
    bus = EventBus()
    layout = RunLayout(mmul_dir)
    bus.subscribe(
        when("running", "b1-alpha", 1, lambda: queue_decision(layout, "b1-alpha", "continue", default_max_iter=3))
    )
    run(make_engine(mmul_dir, scenario.provider(), bus=bus, max_iter=3, n_strategies=1))
    d = iteration(mmul_dir, "b1-alpha", 1).decision
    assert d is not None and d.action == "continue" and d.overridden_from == "stop" and d.override_id
    prompt = next(r for r in scenario.requests if r.key.node == "decide" and r.key.iteration == 1)
    assert "THE USER HAS CHOSEN THE ACTION FOR THIS DECISION: continue" in prompt.messages[-1].content
    # Used once: the next decision is the model's again.
    d2 = iteration(mmul_dir, "b1-alpha", 2).decision
    assert d2 is not None and d2.action == "stop" and d2.overridden_from is None
    m = manifest(mmul_dir, "b1-alpha")
    assert m.pending_decision is None and m.status == "stopped" and m.iterations_done == 2


def test_stop_chosen_by_the_user_asks_no_model(mmul_dir: Path) -> None:
    scenario = Scenario(strategies=["alpha"])
    bus = EventBus()
    layout = RunLayout(mmul_dir)
    stop = lambda: queue_decision(layout, "b1-alpha", "stop", default_max_iter=3)  # noqa: E731
    bus.subscribe(when("running", "b1-alpha", 1, stop))
    run(make_engine(mmul_dir, scenario.provider(), bus=bus, max_iter=3, n_strategies=1))
    d = iteration(mmul_dir, "b1-alpha", 1).decision
    assert d is not None and d.action == "stop" and d.reason == "stopped by the user" and d.automatic
    assert not [c for c in scenario.calls if c[2] == "decide"]
    assert manifest(mmul_dir, "b1-alpha").status == "stopped"


def test_a_changed_decision_reopens_a_finished_branch(mmul_dir: Path) -> None:
    scenario = Scenario(strategies=["alpha"], decide=lambda b, i: {"action": "stop", "reason": "enough"})
    run(make_engine(mmul_dir, scenario.provider(), max_iter=3, n_strategies=1))
    layout = RunLayout(mmul_dir)
    assert manifest(mmul_dir, "b1-alpha").status == "stopped"
    with pytest.raises(SteeringError, match="named no sub-strategies"):
        queue_decision(layout, "b1-alpha", "branch", default_max_iter=3)
    queue_decision(layout, "b1-alpha", "continue", default_max_iter=3)
    run(make_engine(mmul_dir, scenario.provider(), max_iter=3, n_strategies=1, resumed=True))
    d1 = iteration(mmul_dir, "b1-alpha", 1).decision
    assert d1 is not None and d1.action == "continue" and d1.overridden_from == "stop"
    assert iteration(mmul_dir, "b1-alpha", 2).decision is not None
    assert manifest(mmul_dir, "b1-alpha").iterations_done == 2


def test_changing_the_decision_of_a_branch_at_its_budget_raises_max_iter(mmul_dir: Path) -> None:
    scenario = Scenario(strategies=["alpha"])
    run(make_engine(mmul_dir, scenario.provider(), max_iter=2, n_strategies=1))
    layout = RunLayout(mmul_dir)
    m = manifest(mmul_dir, "b1-alpha")
    assert m.status == "done" and m.iterations_done == 2
    queued = queue_decision(layout, "b1-alpha", "continue", default_max_iter=2)
    assert "max_iter raised to 3" in queued.line
    assert read_model(layout.branch("b1-alpha").config, BranchConfig).max_iter == 3
    run(make_engine(mmul_dir, scenario.provider(), max_iter=2, n_strategies=1, resumed=True))
    assert manifest(mmul_dir, "b1-alpha").iterations_done == 3


def test_delete_moves_the_branch_and_its_children_to_the_trash(mmul_dir: Path) -> None:
    def decide(branch: str, iteration: int) -> dict:
        if branch == "b1-alpha" and iteration == 1:
            subs = [{"name": "c", "title": "C", "description": "c"}]
            return {"action": "branch", "reason": "x", "sub_strategies": subs}
        return {"action": "continue", "reason": "more"}

    scenario = Scenario(strategies=["alpha", "beta"], decide=decide)
    bus = EventBus()
    removed: list[str] = []
    layout = RunLayout(mmul_dir)
    bus.subscribe(lambda e: removed.append(e.branch) if isinstance(e, BranchRemoved) else None)
    bus.subscribe(when("running", "b1-alpha.1-c", 2, lambda: queue_delete(layout, "b1-alpha")))
    engine = make_engine(
        mmul_dir, scenario.provider(), bus=bus, max_iter=4, max_depth=2, n_strategies=2, tuner=FakeTuner(delay_s=0.3)
    )
    finished = run(engine)
    assert finished.status == "ok"  # type: ignore[attr-defined]
    assert sorted(removed) == ["b1-alpha", "b1-alpha.1-c"]
    assert layout.branch_names() == ["b2-beta"]
    trash = layout.output / "trash"
    assert (trash / "b1-alpha" / "branch.json").exists() and (trash / "b1-alpha.1-c" / "iter1").is_dir()
    final = read_model(layout.final_results, FinalResults)
    assert [b.name for b in final.branches] == ["b2-beta"]
    # --resume does not bring a deleted root branch back.
    run(make_engine(mmul_dir, scenario.provider(), max_iter=4, max_depth=2, n_strategies=2, resumed=True))
    assert layout.branch_names() == ["b2-beta"]


def test_queue_refusals_are_one_line(mmul_dir: Path) -> None:
    scenario = Scenario(strategies=["alpha"])
    run(make_engine(mmul_dir, scenario.provider(), max_iter=2, n_strategies=1))
    layout = RunLayout(mmul_dir)
    for call, needle in [
        (lambda: queue_message(layout, "nope", "hi"), "no branch named 'nope' (branches: b1-alpha)"),
        (lambda: queue_message(layout, "../b1-alpha", "hi"), "no branch named '../b1-alpha'"),
        (lambda: queue_message(layout, "b1-alpha", " \n\t "), "the message is empty"),
        (lambda: queue_message(layout, "b1-alpha", "x" * 5000), "at most 4,000"),
        (lambda: queue_revert(layout, "b1-alpha", 7, default_max_iter=2), "iteration 7 has no decided kernel"),
        (lambda: queue_decision(layout, "b1-alpha", "jump", default_max_iter=2), "unknown decision 'jump'"),
    ]:
        with pytest.raises(SteeringError, match=needle.replace("(", r"\(").replace(")", r"\)")) as caught:
            call()
        assert "\n" not in str(caught.value)
    # Nothing was written for a refused command.
    assert not (layout.branch("b1-alpha").root / "inbox").exists()
    # Control characters are taken out of a message; newlines stay.
    queued = queue_message(layout, "b1-alpha", "use\x1b[31m red\x07\nline two")
    assert queued.command.text == "use[31m red\nline two"


def test_an_unreadable_inbox_file_is_skipped_once(mmul_dir: Path) -> None:
    scenario = Scenario(strategies=["alpha"])
    run(make_engine(mmul_dir, scenario.provider(), max_iter=2, n_strategies=1))
    layout = RunLayout(mmul_dir)
    inbox = layout.branch("b1-alpha").root / "inbox"
    inbox.mkdir()
    (inbox / "00000000000000000001-1-abcdef.json").write_text("{not json")
    (inbox / "stray.json").write_text(json.dumps({"kind": "delete"}))  # not a command name: ignored
    queue_message(layout, "b1-alpha", "hello")
    run(make_engine(mmul_dir, scenario.provider(), max_iter=2, n_strategies=1, resumed=True))
    m = manifest(mmul_dir, "b1-alpha")
    assert [x.text for x in m.messages] == ["hello"]
    assert "00000000000000000001-1-abcdef" in m.applied and layout.branch_names() == ["b1-alpha"]
