"""The small parts of issue 28 one at a time: cuts that say what they left out, edit_file naming the
lines it changed, a derived floor, the reference's output against the tolerance, the compile check's
text (spills at zero, the limit that binds), one schema per structured call with nothing internal in
it, a prompt built when its call has a concurrency slot, and latency counted from the wire."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from cacao_tui.llm import CallContext, ChatRequest, ChatResponse, Message, TrackedLLM
from cacao_tui.llm.structured import native_schema
from cacao_tui.nodes.briefing import clip, reference_output_line, shorten
from cacao_tui.nodes.compile_check import format_report
from cacao_tui.nodes.decide import DecisionReply
from cacao_tui.nodes.problem_brief import derived_bytes, floor_text
from cacao_tui.nodes.strategize import StrategyList
from cacao_tui.store.state import OutputStats, TuneOutcome
from ktt.problem import load_problem
from ktt.protocol import CheckedConfig, CheckReport, KernelResources, LaunchOccupancy
from tests.engine.conftest import ROOT

TINY = ROOT / "tests" / "ktt" / "data" / "tiny"


def test_a_cut_ends_at_a_sentence_and_says_what_was_left_out() -> None:
    plan = (
        "Step one builds tiles. Step two adds register blocking. Step three vectorises the loads and "
        "stores. Expect 0.4 ms against a floor of 0.26 ms."
    )
    cut = clip(plan, 130, "plan")
    assert cut.startswith("Step one builds tiles. Step two adds register blocking.")
    assert cut.endswith("characters of the plan are left out]") and "0.4 ms" not in cut
    assert clip(plan, 1000) == plan
    words = "word " * 60
    assert shorten(words.strip(), 50).endswith("word …") and "wor …" not in shorten(words.strip(), 50)


def test_edit_file_names_the_lines_it_changed(tmp_path: Path) -> None:
    from cacao_tui.nodes.workspace import Workspace

    it = SimpleNamespace(root=tmp_path)
    branch = SimpleNamespace(mode="continue", it=it)
    ws = Workspace(deps=None, branch=branch)  # type: ignore[arg-type]
    (tmp_path / "kernels.cu").write_text("a\nb\nc\nd\n")
    assert (
        ws.edit("kernels.cu", "b\nc", "B\nC\nC2")
        == "edited kernels.cu: lines 2-3 replaced, now lines 2-4; the file has 5 lines"
    )
    assert ws.edit("kernels.cu", "d\n", "") == "edited kernels.cu: lines 5-6 removed; the file has 4 lines"
    assert ws.write("tuning.yaml", "x: 1\n") == "wrote tuning.yaml (1 lines)"


def test_an_undeclared_floor_is_derived_from_the_boundary_and_says_so() -> None:
    tiny = load_problem(TINY)  # no physical_floor: X read once (4 KB), Y written once (4 KB)
    assert derived_bytes(tiny) == 2 * 1024 * 4
    assert (
        floor_text(tiny, None) == "0.0 MB moved (derived, not declared: each input read and each output written once)"
    )


def test_the_reference_output_is_stated_against_the_tolerance() -> None:
    deps = SimpleNamespace(problem=SimpleNamespace(tolerance=1e-6))
    run = TuneOutcome(ran=True, reference_stats=[OutputStats(buffer="Y", count=16, min=0.0, max=0.25, mean_abs=0.02)])
    line = reference_output_line(deps, run)  # type: ignore[arg-type]
    head = "Reference output (first input set): Y: min 0, max 0.25, mean |x| 0.02"
    assert line == head + "; the tolerance 1e-06 is 0.005% of it\n"
    assert reference_output_line(deps, TuneOutcome(ran=False)) == ""  # type: ignore[arg-type]
    timed = TuneOutcome(ran=True, reference_ms=2.5, reference_source="measured")
    assert reference_output_line(deps, timed) == "Reference time: 2.5 ms (measured by the tuner).\n"  # type: ignore[arg-type]


def _report(occ: float, limiter: str, regs: int, spills: int = 0) -> CheckReport:
    config = CheckedConfig(
        config={"B": 256},
        ok=True,
        roles=["largest parameter values"],
        resources=[KernelResources(kernel="k", registers=regs, spill_stores=spills, spill_loads=spills)],
        occupancy=[
            LaunchOccupancy(
                kernel="k",
                threads=256,
                registers=regs,
                smem_bytes=0,
                blocks_per_sm=8,
                warps_per_sm=64,
                occupancy=occ,
                limiter=limiter,
            )
        ],
    )
    return CheckReport(ok=True, kernel_file="k", spec_file="t", arch="sm_90a", space_size=4, sampled=1,
                       configs=[config], sm_count=132)  # fmt: skip


def test_the_check_prints_spills_at_zero_and_names_the_limit_that_binds() -> None:
    text = format_report(_report(1.0, "warps", 32), "")
    assert "Resources (ptxas) of k, most registers first, and the occupancy they allow (its limit):" in text
    assert ": 32 regs, 0 B spilled, 0 B smem; 256 threads -> 8 blocks/SM, 100% (full)" in text
    assert "(registers)" not in text and "SM_COUNT = 132" in text
    text = format_report(_report(0.25, "registers", 128, spills=16), "")
    assert "128 regs, SPILLS 16 B stored / 16 B loaded, 0 B smem" in text and "25% (registers)" in text
    assert text.splitlines()[0].endswith(" 1 of them SPILL registers.")  # a trial's player missed spills under "passed"


def test_one_schema_and_nothing_internal_in_it() -> None:
    def descriptions(node: object) -> list[str]:
        if isinstance(node, dict):
            own = [node["description"]] if isinstance(node.get("description"), str) else []
            return own + [d for v in node.values() for d in descriptions(v)]
        return [d for v in node for d in descriptions(v)] if isinstance(node, list) else []

    for model in (DecisionReply, StrategyList):
        schema = native_schema(model)
        assert "prompts/" not in json.dumps(schema) and ".txt" not in json.dumps(schema)
        assert descriptions(schema) == []  # the prompt says what each field means, once
    # Every field is required in the one schema (optional ones nullable): text and response format agree.
    assert set(native_schema(DecisionReply)["required"]) == set(DecisionReply.model_fields)


class Gate:
    """A FAKE provider whose calls each wait for the test to let them finish (no sleeps)."""

    name, model = "gate", "gate-model"

    def __init__(self, clock: list[float]) -> None:
        self.clock = clock
        self.started: list[asyncio.Event] = [asyncio.Event(), asyncio.Event()]
        self.release: list[asyncio.Event] = [asyncio.Event(), asyncio.Event()]
        self.n = 0

    async def complete(self, request: ChatRequest) -> ChatResponse:
        i = self.n
        self.n += 1
        self.started[i].set()
        await self.release[i].wait()
        self.clock[0] += 5.0  # every answer takes 5 s on the FAKE clock
        return ChatResponse(text="ok")

    async def aclose(self) -> None:
        return None


async def test_latency_counts_from_the_wire_not_from_the_wait_for_a_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr("cacao_tui.llm.tracked.time.monotonic", lambda: clock[0])
    gate = Gate(clock)
    records = []
    llm = TrackedLLM(gate, max_concurrent=1, on_call=records.append)  # type: ignore[arg-type]
    hi = [Message(role="user", content="hi")]
    first = asyncio.create_task(llm.chat(hi, ctx=CallContext(branch="a", iteration=1, node="plan")))
    await gate.started[0].wait()
    second = asyncio.create_task(llm.chat(hi, ctx=CallContext(branch="b", iteration=1, node="plan")))
    await asyncio.sleep(0)  # let the second call reach the semaphore: it waits for the slot
    clock[0] += 100.0  # the first call is slow: the second waits 100 s + its 5 s for a slot
    gate.release[0].set()
    await first
    await gate.started[1].wait()
    gate.release[1].set()
    await second
    by_branch = {r.branch: r for r in records}
    assert by_branch["a"].latency_s == pytest.approx(105.0) and by_branch["a"].queued_s == 0
    assert by_branch["b"].latency_s == pytest.approx(5.0) and by_branch["b"].queued_s == pytest.approx(105.0)
    assert by_branch["b"].answer_s == pytest.approx(5.0)


async def test_a_prompt_built_inside_a_slot_sees_the_run_as_it_is_when_sent() -> None:
    gate = Gate([0.0])
    llm = TrackedLLM(gate, max_concurrent=1)  # type: ignore[arg-type]
    status = {"b2": "running, 0 iterations"}
    hi = [Message(role="user", content="hi")]
    busy = asyncio.create_task(llm.chat(hi, ctx=CallContext(branch="b2", iteration=1, node="decide")))
    await gate.started[0].wait()
    seen: list[str] = []

    async def step() -> None:
        async with llm.slot():  # the prompt is built here, once the slot is this step's
            seen.append(status["b2"])
            await llm.chat(hi, ctx=CallContext(branch="b1", iteration=1, node="propose"))

    waiting = asyncio.create_task(step())
    await asyncio.sleep(0)
    status["b2"] = "stopped, 1 iteration"  # b2 decided while the step waited for the slot
    gate.release[0].set()
    await busy
    await gate.started[1].wait()
    gate.release[1].set()
    await waiting
    assert seen == ["stopped, 1 iteration"]


def test_a_result_over_several_shapes_names_each_shapes_time_and_reference() -> None:
    """A trial's reviewer could not judge the per-shape speedups behind a score (only the primary's
    time and the score were shown)."""
    from cacao_tui.nodes.briefing import outcome_text
    from cacao_tui.store.state import CaseOutcome, TuneOutcome

    cases = [
        CaseOutcome(name="square", status="ok", time_ms=0.0363, reference_ms=0.0656, speedup=1.8),
        CaseOutcome(name="small", status="ok", time_ms=0.0059, reference_ms=0.0079, speedup=1.35),
        CaseOutcome(name="tall", status="no_valid"),
    ]
    run = TuneOutcome(ran=True, best_ms=0.0363, speedup=1.8, score=1.63, valid=9, evaluated=9, cases=cases)
    text = outcome_text(run)
    assert "score 1.63 (geometric mean over shapes) [square 0.0363 ms vs reference 0.0656 ms = 1.80x; " \
           "small 0.0059 ms vs reference 0.0079 ms = 1.35x; tall: no_valid]" in text  # fmt: skip


def test_a_kernel_launched_with_several_block_sizes_shows_each_launchs_occupancy() -> None:
    # a multi-pass trial's check showed only the last (reduce) pass's 256 threads for a 1024-thread first pass
    report = _report(0.5, "registers", 39)
    first = report.configs[0].occupancy[0].model_copy(update={"threads": 1024, "blocks_per_sm": 1})
    later = report.configs[0].occupancy[0].model_copy(update={"threads": 256, "blocks_per_sm": 6, "occupancy": 0.75})
    report.configs[0].occupancy = [first, later, later]
    text = format_report(report, "")
    assert (
        "its 3 launches, in order (each shape once): 1024 threads -> 1 blocks/SM, 50% (registers) | "
        "256 threads -> 6 blocks/SM, 75% (registers)"
    ) in text
