"""What a real model sees (issue 28), on dry runs of shipped problems with a FAKE scripted model
(tests/engine/scenario.py) and the FAKE tuner: the target GPU's facts, notes by relevance, what a
kernel may use before the plan, the data and the reference, dry runs reviewed as dry runs, the
change and the compile check in decide, truthful files, a superseded plan, the author's summary
as the iteration's record.

Snapshots (tests/engine/snapshots/*.txt): regenerate with ``CACAO_UPDATE_SNAPSHOTS=1`` and read the diff.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from cacao_tui.llm import ChatRequest
from tests.engine.conftest import ROOT, make_engine
from tests.engine.scenario import SPEC, Scenario, kernel_source
from tests.engine.test_prompt_context import check_snapshot


def copy(tmp: Path, name: str) -> Path:
    target = tmp / name
    shutil.copytree(ROOT / "problems" / name, target, ignore=shutil.ignore_patterns("output", "archive"))
    return target


def text_of(request: ChatRequest) -> str:
    """Everything the model reads in a request: the system prompt, the turns, the tool results."""
    parts = [request.system or ""] + [m.content or "" for m in request.messages]
    return "\n\n".join(parts)


def requests(scenario: Scenario, node: str, branch: str | None = None) -> list[ChatRequest]:
    return [r for r in scenario.requests if r.key.node == node and (branch is None or r.key.branch == branch)]


def dry_run(problem: Path, scenario: Scenario, **settings: object) -> None:
    options = {"max_iter": 2, "n_strategies": len(scenario.strategies), "dry_run": True, **settings}
    finished = asyncio.run(make_engine(problem, scenario.provider(), **options).run())  # type: ignore[arg-type]
    assert finished.status in ("ok", "no_result"), finished


@pytest.fixture(scope="module")
def stencil(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    scenario = Scenario(strategies=["tiles", "reduction"])
    dry_run(copy(tmp_path_factory.mktemp("stencil"), "stencil"), scenario)
    return scenario


@pytest.fixture(scope="module")
def gemm(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    scenario = Scenario(strategies=["wgmma", "wmma"])  # their words call for the Hopper notes, the wmma notes
    dry_run(copy(tmp_path_factory.mktemp("gemm"), "gemm_bf16"), scenario, max_iter=1, max_depth=2)
    return scenario


def test_a_dry_run_on_sm_90_names_the_h200s_facts(stencil: Scenario) -> None:
    for node in ("analyze", "strategize", "plan", "author", "propose"):
        text = text_of(requests(stencil, node)[0])
        assert "unknown GPU" not in text and "no device table was measured" not in text, node
        head = text[text.index("Target GPU (") :]
        device = head.split("\n\n")[0].rstrip("\n") + "\n"  # the brief's last part (a dry run has no budget line)
        assert "Tuning budget" not in text, node  # a dry run tunes nothing
        assert device.startswith("Target GPU (datasheet of the usual sm_90 GPU):")
        assert "NVIDIA H200 SXM (sm_90): 132 SMs at up to 1980 MHz, 141 GiB" in device
        assert "DRAM 4,800 GB/s datasheet" in device and "MUFU (rsqrt, ex2, sin...) 16" in device
        assert "DRY RUN: kernels are only compile-checked; nothing is run or timed in this run." in text, node
    check_snapshot("target_datasheet", device)
    brief = text_of(requests(stencil, "plan")[0])
    assert "SM_COUNT=132 (the target's SMs" in brief
    assert "Physical floor: 134.2 MB moved (~0.0329 ms at 4,080 GB/s, what a copy reaches)" in brief
    decide = text_of(requests(stencil, "decide")[0])
    assert "Target GPU (datasheet): NVIDIA H200 SXM (sm_90): 132 SMs" in decide


def test_target_names_another_gpu(tmp_path: Path) -> None:
    scenario = Scenario(strategies=["tiles"])
    dry_run(copy(tmp_path, "stencil"), scenario, max_iter=1, target="RTX4090")
    text = text_of(requests(scenario, "analyze")[0])
    assert "Target GPU (datasheet of the GPU --target names)" in text
    assert "NVIDIA GeForce RTX 4090 (sm_89): 128 SMs" in text and "FP64 FMA 2" in text and "SM_COUNT=128" in text


def test_the_stencil_prompts_carry_no_tma_notes_and_gemm_bf16s_do(stencil: Scenario, gemm: Scenario) -> None:
    hopper = ("cp.async.bulk.tensor", "wgmma", "tensor_map", "CUtensorMap")
    for request in stencil.requests:
        text = text_of(request)
        assert not any(word in text for word in hopper), (request.key, [w for w in hopper if w in text])
    author = text_of(requests(gemm, "author", "b1-wgmma")[0])
    assert "Notes this problem calls for" not in author  # on sm_90 a bf16 GEMM's tensor-core notes go by branch
    assert "Notes for this branch's strategy (hopper_tma):" in author  # a wgmma branch; an mma.sync one not
    assert all(word in author for word in hopper)
    tables = ("half or __nv_bfloat16 inputs, float (or half) accumulator: 16x16x16, 32x8x16, 8x32x16",
              "f16 / bf16 -> f32: m16n8k8, m16n8k16")  # fmt: skip
    assert not any(t in author for t in tables)  # a wgmma branch has no use for the wmma / mma.sync shapes
    # The wmma / mma shape tables where those instructions are the branch's technique.
    wmma = text_of(requests(gemm, "author", "b2-wmma")[0])
    assert "Notes for this branch's strategy (tensor_cores):" in wmma and all(t in wmma for t in tables)
    assert not any(word in wmma for word in ("cp.async.bulk.tensor", "CUtensorMap"))
    assert "tensor_cores" in text_of(requests(gemm, "analyze")[0])
    assert "on sm_90 and newer: TMA tensor maps" in text_of(requests(gemm, "strategize")[0])


def test_strategize_promises_sub_branches_only_where_the_run_opens_them(stencil: Scenario, gemm: Scenario) -> None:
    assert "rounds (write kernel, tune, profile, refine) and may later split into sub-branches" in text_of(
        requests(gemm, "strategize")[0]
    )  # --max-depth 2
    one_level = text_of(requests(stencil, "strategize")[0])  # --max-depth 1
    assert "refine) (no sub-branches), so a strategy" in one_level and "may later split" not in one_level
    assert "(level 1 of at most 1; this run opens no sub-branches)" in text_of(requests(stencil, "plan")[0])
    assert "(level 1 of at most 2):" in text_of(requests(gemm, "plan")[0])


def test_a_strategy_gets_the_notes_its_own_words_call_for(stencil: Scenario) -> None:
    shuffle = text_of(requests(stencil, "author", "b2-reduction")[0])
    tiles = text_of(requests(stencil, "author", "b1-tiles")[0])
    assert "Notes for this branch's strategy (reductions):" in shuffle and "__shfl_xor_sync" in shuffle
    assert "Notes for this branch's strategy" not in tiles and "__shfl_xor_sync" not in tiles
    # Every note set is one read_notes call away; the tool is offered in every authoring step.
    assert all("read_notes" in {t.name for t in r.tools} for r in requests(stencil, "author"))


def test_read_notes_lists_and_returns_the_note_sets(tmp_path: Path) -> None:
    def author(branch: str, iteration: int, index: int) -> dict | None:
        if index != 0:
            return None
        return {"tool_calls": [
            {"id": "n1", "name": "read_notes", "arguments": {}},
            {"id": "n2", "name": "read_notes", "arguments": {"topic": "hopper_tma"}},
            {"id": "n3", "name": "read_notes", "arguments": {"topic": "nonsense"}},
            {"id": "w1", "name": "write_file", "arguments": {"path": "kernels.cu", "content": kernel_source(1.0)}},
            {"id": "w2", "name": "write_file", "arguments": {"path": "tuning.yaml", "content": SPEC}},
            {"id": "c1", "name": "check_compilation", "arguments": {}}]}  # fmt: skip

    scenario = Scenario(strategies=["tiles"], author_script=author)
    dry_run(copy(tmp_path, "stencil"), scenario, max_iter=1)
    second = requests(scenario, "author")[1].messages
    results = {m.tool_call_id: m for m in second if m.role == "tool"}
    assert "- hopper_tma: Hopper: TMA tensor maps" in (results["n1"].content or "")
    assert "cp.async.bulk.tensor" in (results["n2"].content or "") and not results["n2"].is_error
    assert results["n3"].is_error and "no topic 'nonsense'" in (results["n3"].content or "")


def test_scratch_and_launches_appear_in_strategize_and_plan(stencil: Scenario) -> None:
    for node in ("strategize", "plan"):
        text = text_of(requests(stencil, node)[0])
        abilities = text[text.index("What a kernel and its tuning space may use") :]
        abilities = abilities[: abilities.index("\n\n")] + "\n"
        assert "several kernels, launched in order" in abilities and "scratch device buffers" in abilities
        assert "zeroed before every run inside the\n  timed span" in abilities and "repeat blocks" in abilities
        assert "SM_COUNT" in abilities and "tensor maps" not in abilities  # an fp32 stencil: no Hopper line
    check_snapshot("abilities", abilities)
    assert "say which launches, scratch buffers or passes it needs" in text_of(requests(stencil, "strategize")[0])
    assert "its kernels, launches, scratch buffers\nand passes" in text_of(requests(stencil, "plan")[0])


def test_the_data_and_the_reference_are_stated(stencil: Scenario, tmp_path: Path) -> None:
    brief = text_of(requests(stencil, "analyze")[0])
    assert "- IN: float[NX * NY] (16,777,216, 67.1 MB), read: uniform random values in [-1, 1] (input set 0: " \
           "seed 7; set 1 redrawn)" in brief  # fmt: skip
    assert "- OUT: float[NX * NY] (16,777,216, 67.1 MB), write, validated: holds uniform random values" in brief
    assert "Reference: a CUDA kernel (ref_kernel.cu, stencil_ref), launched with grid" in brief
    assert "Reference time: not measured (dry run)" in brief
    assert "Validation: each element of OUT within 1e-05 (absolute) of the reference on both input sets" in brief
    # The author has all of it, the reference's source too; plan and propose (which plan or review a kernel)
    # the data's ranges, the rule, the floor and the boundary, the reference by its kind (the analysis
    # describes it).
    author = text_of(requests(stencil, "author")[0])
    # Which result is the best, where several shapes are scored (a trial's player could not tell).
    assert "every shape must pass; the best result is the highest score, then the fastest on the primary" in author
    assert "Macros (-D, and in inputs.hpp, which kernels may #include): NX=" in author
    assert "Reference time: not measured (dry run)" in author and "extern \"C\" __global__ void stencil_ref" in author
    for node in ("plan", "propose"):
        review = text_of(requests(stencil, node)[0])
        assert "Reference: a CUDA kernel (the analysis below describes it)" in review, node
        assert "- IN: float[NX * NY] (16,777,216, 67.1 MB), read: uniform random values in [-1, 1]\n" in review, node
        assert "Validation: each element of OUT within 1e-05" in review and "Physical floor:" in review, node
        assert "stencil_ref(" not in review, node
        assert "Macros: NX=" in review and "inputs.hpp" not in review.split("Analysis (")[0], node
        # The boundary's order is there too: a plan names the kernel's parameters (a trial's planner had to
        # take it from the analysis step's prompt, which a fresh context does not have).
        assert "Kernel parameters, in order: const float* IN, float* OUT" in review, node
    # A C or Python reference is the serial function it is (no grid); a seeded time is said to be seeded.
    from types import SimpleNamespace

    from cacao_tui.nodes.problem_brief import reference_head, reference_time_text
    from cacao_tui.store.layout import RunLayout
    from ktt.problem import load_problem

    problem = copy(tmp_path, "transpose")
    (problem / "output").mkdir()
    (problem / "output" / "reference_time.json").write_text(json.dumps({"reference_time_us": 1500.0}))
    transpose = load_problem(problem)
    assert reference_head(transpose) == "a serial C function (ref_cpu.c) run on the host; scalars arrive as macros"
    assert reference_head(load_problem(ROOT / "problems" / "softmax")) == (
        "a Python function (ref.py, softmax) run on the host"
    )
    deps = SimpleNamespace(problem=transpose, layout=RunLayout(problem), settings=SimpleNamespace(dry_run=True))
    assert reference_time_text(deps) == (  # type: ignore[arg-type]
        "1.5 ms, seeded by hand in output/reference_time.json (the speedup's denominator)"
    )


def test_a_dry_run_is_reviewed_at_compile_level(stencil: Scenario) -> None:
    propose = text_of(requests(stencil, "propose")[0])
    assert "Nothing was timed or profiled (a dry run), so review the kernel at compile level" in propose
    assert "Tuning landscape:" not in propose and "Did the change of this iteration do what" not in propose
    assert "Compile check of these files:" in propose
    decide = text_of(requests(stencil, "decide")[0])
    assert "start_from: latest (nothing measured: no fastest kernel to return to)" in decide
    assert "start_from: best" not in decide and "Tuning landscape" not in decide
    assert "(not timed: a dry run)" in decide
    # With max_iter 2, iteration 1's decision is told that the next iteration is the last.
    assert "The next iteration (2 of 2) is this branch's last" in decide
    # Decide sees the iteration's change and its compile check (the resources, without the mix).
    assert "This iteration's files (the branch's first files):\nkernels.cu (new):" in decide
    assert "Compile check of these files:\n" in decide


def test_the_author_is_told_which_files_exist(stencil: Scenario) -> None:
    first = text_of(requests(stencil, "author", "b1-tiles")[0])
    assert "There are no files yet: this iteration writes the branch's first kernels.cu and tuning.yaml" in first
    assert "read_file reads: reference, inputs.hpp." in first
    later = next(r for r in requests(stencil, "author", "b1-tiles") if r.key.iteration == 2)
    # The current files are quoted whole in the task: read_file names the others.
    assert "read_file reads the files above (base/ keeps them as they start), iter1/kernels.cu, reference" in text_of(
        later
    )
    rule = (
        "Inside an expression\n`//` starts a comment (it is not integer division); elsewhere `#` starts a YAML comment"
    )
    assert rule in first


def test_a_plan_whose_structure_changed_is_marked_superseded(tmp_path: Path) -> None:
    two_launches = SPEC + "  - kernel: k\n    grid: {x: 1}\n    block: {x: P}\n"

    def author(branch: str, iteration: int, index: int) -> dict | None:
        if iteration != 2:
            return None
        if index == 0:
            source = kernel_source(0.5, "// two passes now\n")
            return {"tool_calls": [
                {"id": "w1", "name": "write_file", "arguments": {"path": "kernels.cu", "content": source}},
                {"id": "w2", "name": "write_file", "arguments": {"path": "tuning.yaml", "content": two_launches}},
                {"id": "c1", "name": "check_compilation", "arguments": {}}]}  # fmt: skip
        return {"tool_calls": [{"id": "e", "name": "end_step", "arguments": {"summary": "Now two launches of k."}}]}

    scenario = Scenario(strategies=["tiles"], author_script=author)
    dry_run(copy(tmp_path, "stencil"), scenario, max_iter=3)
    third = text_of(next(r for r in requests(scenario, "author") if r.key.iteration == 3))
    assert "Branch plan (Strategy tiles), written for iteration 1, is SUPERSEDED" in third
    assert "(then k in 1 launch(es); now k in 2 launch(es))" in third
    assert "- iteration 2: Now two launches of k." in third and "plan for b1-tiles #1" not in third
    second = text_of(next(r for r in requests(scenario, "author") if r.key.iteration == 2))
    assert "Branch plan (Strategy tiles), written for iteration 1:\nplan for b1-tiles #1" in second


def test_the_iterations_log_entry_is_the_authors_summary(tmp_path: Path) -> None:
    from cacao_tui.store.atomic import read_model
    from cacao_tui.store.layout import RunLayout
    from cacao_tui.store.state import IterState

    scenario = Scenario(strategies=["tiles"])  # the last iteration is stopped by the budget, not by a model
    problem = copy(tmp_path, "stencil")
    dry_run(problem, scenario, max_iter=1)
    st = read_model(RunLayout(problem).branch("b1-tiles").iteration(1).state, IterState)
    assert st.decision is not None and st.decision.automatic
    assert st.author is not None and st.author.message
    assert st.decision.iteration_summary.startswith(" ".join(st.author.message.split()))


def test_plan_and_propose_open_with_the_cached_brief_and_analysis(stencil: Scenario) -> None:
    """The shared [brief + analysis] prefix is its own cached message in every plan and propose call
    (a rendered prompt's blank lines are tidied: the prefix is tidied the same way, or it would not match)."""
    for node in ("plan", "propose", "analyze", "strategize"):
        for request in requests(stencil, node):
            first = request.messages[0]
            assert first.cache_prefix and first.content.startswith("## Problem: stencil"), (node, request.key)
            assert len(request.messages) >= 2 and not request.messages[1].cache_prefix


def test_strategize_and_plan_know_the_iteration_budget(stencil: Scenario) -> None:
    # a trial's player learned "Iterations used: 1 of 3" only in the first decision (docs/agent_trials.md)
    assert "iterates for up to 2 rounds" in text_of(requests(stencil, "strategize")[0])
    assert "Iterations: up to 2 in this branch" in text_of(requests(stencil, "plan")[0])


def test_the_analysis_is_asked_to_fit_what_later_steps_quote(stencil: Scenario) -> None:
    # a trial's analysis ran 98 characters over and every later prompt carried the cut's marker
    assert "Keep it under 6,000 characters (about 800 words)" in text_of(requests(stencil, "analyze")[0])


def test_a_problem_of_several_shapes_says_each_is_tuned_on_its_own(stencil: Scenario) -> None:
    # a trial's player guessed that the square grid's best configuration ran unchanged on the others
    assert "each shape is tuned on its own" in text_of(requests(stencil, "plan")[0])
    author = requests(stencil, "author")[0]  # the tools' file parameter no longer reads as "tuning.yaml only"
    path = next(t for t in author.tools if t.name == "write_file").parameters["properties"]["path"]
    assert path["description"] == "kernels.cu or tuning.yaml"
