"""Prompt snapshots of the shipped replay session (problems/mmul/session.jsonl), run on the
FAKE tuner: every field of a decision arrives in the next step's recorded prompt, and a user
message sent mid-run arrives in the branch's next prompts (and makes it plan again)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from cacao_tui.engine.control import queue_message
from cacao_tui.engine.events import DecisionMade, EventBus, IterationStatusChanged
from cacao_tui.llm import ProviderChoice
from cacao_tui.llm.factory import build_provider
from cacao_tui.store.atomic import read_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import BranchManifest, IterState
from tests.engine.conftest import ROOT, make_engine
from tests.engine.prompt_records import opening

DEMO = ROOT / "problems" / "mmul" / "demo"
MESSAGE_TILING = "Please keep PAD in every tuning space: bank conflicts matter here."
MESSAGE_STRIP = "Look at the long strips (TM = 16) before you give up on this branch."


def prompt(layout: RunLayout, branch: str, iteration: int, node: str, index: int = 0) -> str:
    record = layout.branch(branch).iteration(iteration).llm / f"{node}_{index:03d}.json"
    return opening(json.loads(record.read_text()))


def state(layout: RunLayout, branch: str, iteration: int) -> IterState:
    return read_model(layout.branch(branch).iteration(iteration).state, IterState)


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunLayout, list[DecisionMade]]:
    import shutil

    problem = tmp_path_factory.mktemp("flow") / "mmul"
    shutil.copytree(ROOT / "problems" / "mmul", problem, ignore=shutil.ignore_patterns("output", "archive"))
    layout = RunLayout(problem)
    bus = EventBus()
    decisions: list[DecisionMade] = []
    sent: set[str] = set()

    def on_event(event: object) -> None:
        if isinstance(event, DecisionMade):
            decisions.append(event)
        # Mid-run, at a fixed point: while an iteration is being tuned (between two prompts).
        if isinstance(event, IterationStatusChanged) and event.status == "running" and event.iteration == 1:
            if event.branch == "b1-tiling" and "t" not in sent:
                sent.add("t")
                queue_message(layout, "b1-tiling", MESSAGE_TILING, source="test")
            if event.branch == "b2-strip" and "s" not in sent:
                sent.add("s")
                queue_message(layout, "b2-strip", MESSAGE_STRIP, source="test")

    bus.subscribe(on_event)
    choice = ProviderChoice(provider="replay", model="replay", source="test")
    provider = build_provider(choice, replay_from=problem / "session.jsonl")
    engine = make_engine(problem, provider, bus=bus, max_iter=5, max_depth=2, n_strategies=3)
    finished = asyncio.run(engine.run())
    assert finished.status == "ok", finished
    return layout, decisions


def test_the_session_is_up_to_date_with_its_script() -> None:
    done = subprocess.run([sys.executable, str(DEMO / "build_session.py"), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_feedback_reaches_the_next_author_prompt(replayed: tuple[RunLayout, list[DecisionMade]]) -> None:
    layout, _ = replayed
    feedback = state(layout, "b1-tiling", 1).decision.feedback  # type: ignore[union-attr]
    assert feedback.startswith("Replace the naive loop with square TILE x TILE shared-memory tiles")
    author = prompt(layout, "b1-tiling", 2, "author")
    assert f"Feedback for this iteration: {feedback}" in author
    assert "Task: make the change the last decision asks for" in author
    # The next iteration starts from the latest files (iteration 1), which are in its workspace.
    assert "Current files, from iteration 1 of this branch (in your workspace" in author


def test_skip_implement_runs_a_configuration_only_iteration(replayed: tuple[RunLayout, list[DecisionMade]]) -> None:
    layout, _ = replayed
    assert state(layout, "b1-tiling", 2).decision.skip_implement  # type: ignore[union-attr]
    st3 = state(layout, "b1-tiling", 3)
    assert st3.mode == "configure" and st3.base_iteration == 2
    author = prompt(layout, "b1-tiling", 3, "author")
    assert "Task: a configuration-only iteration: kernels.cu stays exactly as it is (it cannot be written" in author
    it2, it3 = layout.branch("b1-tiling").iteration(2), layout.branch("b1-tiling").iteration(3)
    assert it3.kernel.read_text() == it2.kernel.read_text()  # same kernel
    assert "TILE: [8, 16]\n" in it2.spec.read_text() and "TILE: [8, 16, 32]" in it3.spec.read_text()
    # propose and decide say which kind of iteration it was.
    assert "configuration only: the previous kernel, a new tuning space" in prompt(layout, "b1-tiling", 3, "propose")


def test_error_analysis_reaches_the_retry(replayed: tuple[RunLayout, list[DecisionMade]]) -> None:
    layout, _ = replayed
    d = state(layout, "b3-quad", 1).decision
    assert d is not None and d.action == "retry" and d.error_analysis is not None
    st2 = state(layout, "b3-quad", 2)
    assert st2.mode == "retry"
    author = prompt(layout, "b3-quad", 2, "author")
    assert "Task: the last iteration failed. The current files are the ones that failed; make the\nsmallest" in author
    assert f"Error analysis (validation): cause: {d.error_analysis.root_cause}" in author
    assert f"Suggested fix: {d.error_analysis.suggested_fix}" in author
    # The retry edited the latest (failed) files: one line changed, and the result is the correct kernel.
    assert layout.branch("b3-quad").iteration(2).kernel.read_text() == (DEMO / "7_quad.cu").read_text()


def test_iteration_summaries_reach_later_prompts_and_the_tree(
    replayed: tuple[RunLayout, list[DecisionMade]],
) -> None:
    layout, decisions = replayed
    summary = state(layout, "b1-tiling", 1).decision.iteration_summary  # type: ignore[union-attr]
    assert summary
    line = f"- iter 1: {summary}"
    for node, iteration in (("decide", 2), ("author", 2), ("propose", 4), ("decide", 4)):
        assert line in prompt(layout, "b1-tiling", iteration, node), (node, iteration)
    # The event the tree and the headless renderer show carries it.
    event = next(e for e in decisions if e.branch == "b1-tiling" and e.iteration == 1)
    assert event.decision is not None and event.decision.iteration_summary == summary


def test_sub_strategies_and_the_reason_reach_the_children(replayed: tuple[RunLayout, list[DecisionMade]]) -> None:
    layout, _ = replayed
    parent = read_model(layout.branch("b1-tiling").manifest, BranchManifest)
    assert parent.children == ["b1-tiling.1-vec-dbuf", "b1-tiling.2-vec-smem"]
    plan = prompt(layout, "b1-tiling.1-vec-dbuf", 1, "plan")
    assert "float4 global loads + double-buffered shared tiles" in plan
    assert "Current files, from the parent branch b1-tiling, iteration 4" in plan
    assert "mmul_regblock" in plan  # the parent's kernel


def test_propose_sees_the_kernel_tuner_output_best_and_tree(
    replayed: tuple[RunLayout, list[DecisionMade]],
) -> None:
    layout, _ = replayed
    propose = prompt(layout, "b1-tiling", 2, "propose")
    assert "This iteration's kernel and tuning space:" in propose and "mmul_tiled" in propose
    assert "Tuning landscape:" in propose and "Fastest 4:" in propose and "tuner: result: ok;" in propose
    assert "Best of this branch so far:" in propose
    assert "Other branches of this run" in propose


def test_plan_once_per_branch_and_again_after_a_message(replayed: tuple[RunLayout, list[DecisionMade]]) -> None:
    layout, _ = replayed
    m = read_model(layout.branch("b1-tiling").manifest, BranchManifest)
    assert [msg.text for msg in m.messages] == [MESSAGE_TILING]  # recorded once
    plans = sorted(p.parent.parent.name for p in layout.branch("b1-tiling").root.glob("iter*/llm/plan_*.json"))
    assert plans == ["iter1", "iter2"]  # the first plan, then one after the message
    again = prompt(layout, "b1-tiling", 2, "plan")
    assert MESSAGE_TILING in again and "Revise the plan of this branch for iteration 2 onwards" in again
    assert m.plan_iteration == 2 and m.plan == state(layout, "b1-tiling", 2).plan
    # Every later prompt of the branch carries it; none before the message did.
    for node, iteration in (("propose", 1), ("decide", 1), ("author", 2), ("author", 4), ("decide", 4)):
        assert MESSAGE_TILING in prompt(layout, "b1-tiling", iteration, node), (node, iteration)
    assert MESSAGE_TILING not in prompt(layout, "b1-tiling", 1, "author")


def test_a_message_to_a_branch_in_its_last_iteration(replayed: tuple[RunLayout, list[DecisionMade]]) -> None:
    layout, _ = replayed
    m = read_model(layout.branch("b2-strip").manifest, BranchManifest)
    assert [msg.text for msg in m.messages] == [MESSAGE_STRIP] and m.messages[0].iteration == 1
    assert MESSAGE_STRIP in prompt(layout, "b2-strip", 1, "propose")
    assert MESSAGE_STRIP in prompt(layout, "b2-strip", 1, "decide")
    assert MESSAGE_STRIP not in prompt(layout, "b2-strip", 1, "author")


def test_the_authoring_rules_are_in_the_stable_prefix(replayed: tuple[RunLayout, list[DecisionMade]]) -> None:
    """The step's rules (how to work, the tool cap) are the same in every authoring call of a run:
    they close the cacheable first message, identical in every branch and iteration, and the
    task after it no longer repeats them (issue 20: what is constant is cached)."""
    layout, _ = replayed
    firsts = []
    for branch in ("b1-tiling", "b2-strip"):
        for iteration in layout.branch(branch).iteration_indices():
            record = layout.branch(branch).iteration(iteration).llm / "author_000.json"
            if record.exists():
                firsts.append(json.loads(record.read_text())["messages"][:2])
    assert len(firsts) >= 3
    stable = {first[0]["content"] for first in firsts}
    assert len(stable) == 1 and all(first[0]["cache_prefix"] for first in firsts)
    (prefix,) = stable
    assert "How to work in an authoring step:" in prefix and "You have at most 50 tool calls" in prefix
    assert prefix.index("How to work") > prefix.index("tuning.yaml")  # after the tuning-spec guide
    assert all("How to work" not in first[1]["content"] for first in firsts)
