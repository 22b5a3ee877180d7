"""Prompt snapshots (issue 21): what each step of a branch sees of the hardware and the search.

The shipped mmul replay session runs on the FAKE GPU tuner (tests/engine/fakes.py: a FAKE
device description, profiles recorded on an H200, times from the kernels' sources). The
blocks below are compared with tests/engine/snapshots/*.txt; after an intended prompt change
regenerate them with ``CACAO_UPDATE_SNAPSHOTS=1 pytest tests/engine/test_prompt_context.py``
and read the diff.

- the device table and the analysis: in plan, author and propose (decide: the target in brief, and
  the iteration's change and compile check instead of the analysis);
- the physical floor: computed for the measured device;
- the tuning landscape (top N, each parameter's best value and the edge of its range): in
  propose and decide;
- the profile diagnosis (the two leading bottlenecks, stalls, occupancy limiter): in propose
  and in the next iteration's author;
- the parent context (its last proposal, profile diagnosis and decision reason): in a child's
  plan and first author.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from cacao_tui.llm import ProviderChoice
from cacao_tui.llm.factory import build_provider
from cacao_tui.store.layout import RunLayout
from tests.engine.conftest import ROOT, make_engine
from tests.engine.fakes import FakeGpuTuner
from tests.engine.prompt_records import opening

SNAPSHOTS = Path(__file__).parent / "snapshots"
CHILD = "b1-tiling.1-vec-dbuf"


def prompt(layout: RunLayout, branch: str, iteration: int, node: str, index: int = 0) -> str:
    record = layout.branch(branch).iteration(iteration).llm / f"{node}_{index:03d}.json"
    return opening(json.loads(record.read_text()))



def block(text: str, start: str, end: str) -> str:
    """The text from the line that starts with ``start`` up to (not including) ``end``."""
    i = text.index(start)
    j = text.index(end, i + len(start))
    return text[i:j].rstrip() + "\n"


def device_block(text: str) -> str:
    """The device table: its head line and the '- ' lines under it."""
    lines = text[text.index("Target GPU (measured at the start of this run):") :].splitlines()  # head + "- " lines
    out = [lines[0]]
    for line in lines[1:]:
        if not line.startswith("- "):
            break
        out.append(line)
    return "\n".join(out) + "\n"


def check_snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / f"{name}.txt"
    if os.environ.get("CACAO_UPDATE_SNAPSHOTS"):
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no snapshot {path}: run with CACAO_UPDATE_SNAPSHOTS=1"
    assert text == path.read_text(encoding="utf-8"), f"{name}: the prompt differs from {path}"


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> RunLayout:
    problem = tmp_path_factory.mktemp("context") / "mmul"
    shutil.copytree(ROOT / "problems" / "mmul", problem, ignore=shutil.ignore_patterns("output", "archive"))
    choice = ProviderChoice(provider="replay", model="replay", source="test")
    provider = build_provider(choice, replay_from=problem / "session.jsonl")
    engine = make_engine(problem, provider, tuner=FakeGpuTuner(), max_iter=5, max_depth=2, n_strategies=3)
    finished = asyncio.run(engine.run())
    assert finished.status == "ok", finished
    return RunLayout(problem)


def test_the_device_table_and_the_analysis_reach_plan_author_propose_and_decide(layout: RunLayout) -> None:
    analysis = json.loads(layout.master.read_text())["analysis"]
    device = None
    for node in ("plan", "author", "propose"):
        text = prompt(layout, "b1-tiling", 1, node)
        found = device_block(text)
        assert device is None or found == device, node
        device = found
        assert "Analysis (written at the start of this run):" in text, node
        assert analysis.strip()[:200] in text, node
    assert device is not None
    check_snapshot("device_table", device)
    assert json.loads(layout.device.read_text())["name"].startswith("FAKE H200")  # measured once, kept
    decide = prompt(layout, "b1-tiling", 1, "decide")
    assert "Target GPU (measured): FAKE H200" in decide and "132 SMs" in decide
    assert "Compile check of these files:" in decide and "This iteration's files" in decide


def test_the_floor_is_computed_for_the_measured_device(layout: RunLayout) -> None:
    floor = block(prompt(layout, "b1-tiling", 1, "plan"), "Physical floor:", "\n")
    # 50.3 MB / 4012 GB/s and 17.18 GFLOP / (132 SMs x 1980 MHz x 256) = 66.9 TFLOP/s.
    assert "(~0.0125 ms at 4,012 GB/s, measured)" in floor, floor
    assert "(~0.257 ms at the FP32 CUDA-core peak 66.9 TFLOP/s)" in floor, floor  # ktt.peaks' rule
    assert "4.3 TB/s" not in floor and "67 TFLOP/s fp32" not in floor


def test_the_landscape_reaches_propose_and_decide(layout: RunLayout) -> None:
    propose = block(prompt(layout, "b1-tiling", 1, "propose"), "Tuning landscape:", "\n\nProfile of")
    decide = block(prompt(layout, "b1-tiling", 1, "decide"), "Tuning landscape of this iteration:", "\n\nProposal:")
    assert decide.split("\n", 1)[1].startswith(propose.split("\n", 1)[1].rstrip())  # decide: + the reference
    assert "Fastest 4:" in propose and "- P = 0 in the best" in propose and "tuner: best: " in propose
    check_snapshot("landscape", propose)


def test_the_diagnosis_reaches_propose_and_the_next_author(layout: RunLayout) -> None:
    diagnosis = block(prompt(layout, "b1-tiling", 1, "propose"), "Diagnosis:", "\nMetrics")
    assert "bottleneck 1: short scoreboard stalls" in diagnosis and "limited by registers" in diagnosis
    check_snapshot("diagnosis", diagnosis)
    author = prompt(layout, "b1-tiling", 2, "author")
    shown = block(author, "Iteration 1 profile diagnosis:", "\nIteration log")
    assert shown.split("\n", 1)[1].rstrip() == diagnosis.split("\n", 1)[1].rstrip()


def test_a_child_sees_its_parents_last_proposal_diagnosis_and_decision(layout: RunLayout) -> None:
    plan = prompt(layout, CHILD, 1, "plan")
    parent = block(plan, "The parent branch b1-tiling, iteration 4 (where this branch starts):", "\n\n")
    assert "- profile diagnosis:" in parent and "- proposal: With register blocking in place" in parent
    assert "- decision: branch: Two independent directions remain" in parent
    check_snapshot("parent_context", parent)
    # The author: the same, less the proposal that the decision's feedback distilled (as for a previous iteration).
    author = prompt(layout, CHILD, 1, "author")
    without = re.sub(r"- proposal: .*?\n(?=- )", "", parent, flags=re.DOTALL)
    assert without in author and "- proposal: With register blocking in place" not in author
    assert "- its feedback: " in without


def test_check_compilation_and_validate_are_offered_with_their_reports(layout: RunLayout) -> None:
    record = layout.branch("b1-tiling").iteration(1).llm / "author_000.json"
    tools = {t["name"] for t in json.loads(record.read_text())["tools"]}
    assert {"check_compilation", "validate", "end_step"} <= tools
    assert "validate(config) runs one configuration on the GPU" in prompt(layout, "b1-tiling", 1, "author")


def test_the_landscape_names_a_best_value_at_the_edge_and_the_failures(tmp_path: Path) -> None:
    from cacao_tui.nodes.landscape import landscape_summary
    from cacao_tui.store.layout import IterLayout
    from ktt.protocol import ConfigResult, Mismatch, ValidationReport

    it = IterLayout(tmp_path)
    it.tune_dir.mkdir()
    rows = [ConfigResult(index=i, config={"TILE": t, "PAD": p}, status="ok", time_ms=ms)
            for i, (t, p, ms) in enumerate([(8, 0, 3.0), (16, 0, 2.0), (32, 0, 1.0), (32, 1, 1.2)])]  # fmt: skip
    bad = ValidationReport(buffer="C", bad_count=10, checked=100, first_bad_index=4, max_abs_error=1.0,
                           samples=[Mismatch(index=4, expected=1.0, got=0.0)])  # fmt: skip
    rows.append(ConfigResult(index=4, config={"TILE": 16, "PAD": 1}, status="validation_failed", validation=bad))
    it.tune_results.write_text("".join(r.model_dump_json() + "\n" for r in rows))
    spec = "tune_params:\n  TILE: [8, 16, 32]\n  PAD: [0, 1]\n"
    text = landscape_summary(it, spec, top=3)
    assert "4 of 5 evaluated configurations valid." in text and "  1. 1 ms  TILE=32, PAD=0" in text
    assert "- TILE = 32 in the best; best time per value: 8: 3 ms, 16: 2 ms, 32: 1 ms; AT THE UPPER EDGE" in text
    # a 0/1 switch has no smaller value to try: no edge note (trial players called it noise)
    assert "- PAD = 0 in the best; best time per value: 0: 1 ms, 1: 1.2 ms\n" in text
    assert "Failures: validation_failed 1" in text and "10/100 elements wrong" in text
    assert "[4] expected 1 got 0" in text


def test_decide_sees_every_branch_and_is_told_not_to_repeat_one(layout: RunLayout) -> None:
    text = prompt(layout, "b1-tiling", 4, "decide")
    tree = block(text, "Existing branches of this run (do not open a sub-branch that repeats one):", "\n\n")
    assert "- b1-tiling (this branch) [running" in tree and "- b2-strip [stopped" in tree
    assert "1D register blocking (column strips)" in tree  # each branch's strategy, not only its name
    assert "never one that repeats\n  a branch of the run" in text
    strategize = opening(json.loads((layout.master_llm / "strategize_000.json").read_text()))
    assert "Propose between 1 and 3 optimisation strategies" in strategize
    assert "At least one strategy must do less work" in strategize


def test_after_a_failed_authoring_step_decide_sees_the_errors_and_the_kernel_head(mmul_dir: Path) -> None:
    from tests.engine.scenario import SPEC, Scenario, kernel_source

    broken = kernel_source(1.0, "// FAKE_COMPILE_ERROR\n")

    def author(branch: str, iteration: int, index: int) -> dict:
        return {"tool_calls": [
            {"id": "a", "name": "write_file", "arguments": {"path": "kernels.cu", "content": broken}},
            {"id": "b", "name": "write_file", "arguments": {"path": "tuning.yaml", "content": SPEC}},
            {"id": "c", "name": "check_compilation", "arguments": {}},
            {"id": "d", "name": "end_step", "arguments": {"summary": "try"}}]}  # fmt: skip

    scenario = Scenario(strategies=["alpha"], author_script=author,
                        decide=lambda b, i: {"action": "stop", "reason": "it never compiled"})  # fmt: skip
    asyncio.run(make_engine(mmul_dir, scenario.provider(), max_iter=2, n_strategies=1).run())
    text = next(r for r in scenario.requests if r.key.node == "decide").messages[-1].content
    errors = block(text, "The last compile check of the failed step:", "kernels.cu as the step left it")
    assert "compile check FAILED" in errors and "kernels.cu:2: error: planted error (fake tuner)" in errors
    head = block(text, "kernels.cu as the step left it (the first 40 lines):", "\n```\n")
    assert "   1  // FAKE_TIME_MS: 1.0" in head and "   2  // FAKE_COMPILE_ERROR" in head
