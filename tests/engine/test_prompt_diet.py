"""Issue 28, item 8 (a context diet), on the prompts as sent: what is the same in every call of a run,
of a branch or of a set of siblings comes first, as cached prefixes of their own; what a call does not
need is left out (a dry run's tuning queries, the check's random samples); the Gemini top-up of the
authoring prefix is chosen once per run. The figures are bench/prompt_cost.py's (docs/benchmarks.md)."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from cacao_tui.llm import ChatRequest, ProviderChoice
from cacao_tui.llm.factory import build_provider
from cacao_tui.llm.models import ModelInfo
from cacao_tui.nodes.author import _iteration_range
from cacao_tui.nodes.author_tools import tool_specs
from cacao_tui.nodes.compile_check import format_report
from cacao_tui.store.layout import RunLayout
from ktt.protocol import CheckedConfig, CheckReport, KernelResources, LaunchOccupancy
from tests.engine.conftest import ROOT, make_engine
from tests.engine.scenario import Scenario


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> RunLayout:
    """The shipped mmul session replayed as a dry run (its recorded prompts are read back)."""
    problem = tmp_path_factory.mktemp("diet") / "mmul"
    shutil.copytree(ROOT / "problems" / "mmul", problem, ignore=shutil.ignore_patterns("output", "archive"))
    provider = build_provider(ProviderChoice("replay", "replay", "test"), replay_from=problem / "session.jsonl")
    engine = make_engine(problem, provider, max_iter=5, max_depth=2, n_strategies=3, dry_run=True)
    finished = asyncio.run(engine.run())
    assert finished.status == "ok", finished
    return RunLayout(problem)


def opening(layout: RunLayout, branch: str, iteration: int, node: str = "author") -> list[dict]:
    """The opening user messages of a recorded call (before the first reply)."""
    record = json.loads((layout.branch(branch).iteration(iteration).llm / f"{node}_000.json").read_text())
    out = []
    for m in record["messages"]:
        if m["role"] != "user":
            break
        out.append(m)
    return out


def test_the_plan_is_a_cached_block_worded_the_same_in_each_authoring_step(replayed: RunLayout) -> None:
    firsts = [opening(replayed, "b1-tiling", i) for i in (1, 2, 3, 4)]
    assert all(len(f) == 3 and f[0]["cache_prefix"] and f[1]["cache_prefix"] for f in firsts)
    assert len({f[0]["content"] for f in firsts}) == 1  # the run's prefix
    assert len({f[1]["content"] for f in firsts}) == 1  # the branch's plan, the same words each time
    assert firsts[0][1]["content"].startswith("Branch plan (Classic path: coalescing, shared tiles, register "
                                              "blocking), written for iteration 1:")  # fmt: skip
    assert not firsts[0][2]["cache_prefix"] and firsts[0][2]["content"].startswith("Task: write this branch's first")


def test_siblings_share_what_they_inherit_before_their_own_plans(replayed: RunLayout) -> None:
    one, two = opening(replayed, "b1-tiling.1-vec-dbuf", 1), opening(replayed, "b1-tiling.2-vec-smem", 1)
    assert [len(one), len(two)] == [4, 4] and all(m["cache_prefix"] for m in one[:3])
    assert one[0]["content"] == two[0]["content"] and one[1]["content"] == two[1]["content"]
    inherited = one[1]["content"]
    assert inherited.startswith("The parent branch b1-tiling, iteration 4 (where this branch starts):")
    assert "Current files, from the parent branch b1-tiling, iteration 4" in inherited and "mmul_regblock(" in inherited
    assert one[2]["content"] != two[2]["content"]  # each its own plan
    assert one[3]["content"].startswith("Task: this sub-branch starts from its parent's kernel (the current files")


def test_a_dry_run_offers_no_tuning_queries() -> None:
    def history(tuned: bool) -> dict:
        return next(t for t in tool_specs(tuned=tuned) if t.name == "history").parameters

    assert set(history(True)["properties"]["what"]["enum"]) >= {"landscape", "grep"}
    dry = history(False)
    assert "landscape" not in dry["properties"]["what"]["enum"] and "mode" not in dry["properties"]
    assert [t.name for t in tool_specs(tuned=False)] == [t.name for t in tool_specs(tuned=True)]  # same tools


def _config(values: dict, roles: list[str], regs: int, smem: int = 0) -> CheckedConfig:
    occ = LaunchOccupancy(kernel="k", threads=256, registers=regs, smem_bytes=smem, blocks_per_sm=2,
                          warps_per_sm=16, occupancy=0.25, limiter="registers")  # fmt: skip
    return CheckedConfig(config=values, ok=True, roles=roles, occupancy=[occ],
                         resources=[KernelResources(kernel="k", registers=regs)])  # fmt: skip


def test_the_check_counts_random_samples_but_keeps_every_extreme() -> None:
    configs = [
        _config({"B": 64}, ["largest parameter values"], 100, 4096),
        _config({"B": 8}, ["smallest parameter values"], 40, 512),
        _config({"B": 32}, ["sampled"], 168, 1024),  # random, yet the most registers: shown
        _config({"B": 16}, ["sampled"], 60, 1024),  # random and no extreme: counted
    ]
    report = CheckReport(ok=True, kernel_file="k", spec_file="t", arch="sm_90a", space_size=8, sampled=4,
                         configs=configs, sm_count=132)  # fmt: skip
    text = format_report(report, "")
    assert "B=32 [random; most registers]: 168 regs, 0 B spilled" in text
    assert "B=16" not in text and "(+1 at random, none an extreme)" in text
    assert "B=64 [largest values; most smem]" in text and "B=8 [smallest values; fewest registers; least smem]" in text


def test_iteration_files_are_named_as_a_range() -> None:
    names = ["kernels.cu", "iter1/kernels.cu", "iter2/kernels.cu", "iter3/kernels.cu", "reference"]
    assert _iteration_range(names) == ["kernels.cu", "iter1/ to iter3/kernels.cu", "reference"]
    gap = ["iter1/kernels.cu", "iter3/kernels.cu", "iter4/kernels.cu"]
    assert _iteration_range(gap) == gap  # only a run without gaps


def test_the_cache_top_up_is_chosen_once_per_run(mmul_dir: Path) -> None:
    """A model whose cache minimum the authoring prefix does not reach gets general notes to lift it; the
    choice is made once, so the prefix is the same in every authoring step, whatever the token estimator
    learns in between (it once flipped mid-run, and a prefix that changes is cached by none)."""
    scenario = Scenario(strategies=["alpha", "beta"])
    engine = make_engine(mmul_dir, scenario.provider(), max_iter=2, n_strategies=2, dry_run=True)
    engine.deps.llm.info = ModelInfo(min_cache_tokens=4096)
    original = scenario.respond

    def respond(request: ChatRequest):  # type: ignore[no-untyped-def]
        if request.key.node == "author":
            engine.deps.llm.estimator.chars_per_token *= 1.5  # as calibration moves it
        return original(request)

    scenario.respond = respond  # type: ignore[method-assign]
    asyncio.run(engine.run())
    firsts = [r.messages[0].content for r in scenario.requests if r.key.node == "author" and len(r.messages) <= 4]
    assert len(firsts) >= 3 and len(set(firsts)) == 1
    assert "General notes:" in firsts[0] and "Memory:" in firsts[0]
