"""The validate authoring tool (issue 21): a wrong kernel is found inside the authoring step.

A replay session written here: the author writes a kernel that stores one output in the wrong
place, validates it (NOT VALID, with how many elements and which), fixes it, validates again
(VALID) and ends the step. On the CPU the validator is the FAKE one behind the real ``Tuner``
seam (tests/engine/fakes.py); the ``gpu`` test replays the same story through the real command
on a GPU, where ``ktt validate`` runs the real kernel.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cacao_tui.llm import ProviderChoice
from cacao_tui.llm.demo_session import DemoSession, structured, text, tools
from cacao_tui.llm.factory import build_provider
from cacao_tui.nodes.tuner_output import result_line
from cacao_tui.nodes.validate import config_argument, report_text
from cacao_tui.store.atomic import read_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import IterState
from ktt.protocol import ConfigResult, Mismatch, ValidateReport, ValidationReport
from tests.engine.conftest import ROOT, make_engine
from tests.engine.fakes import FakeGpuTuner
from tests.engine.scenario import SPEC, kernel_source
from tests.pathenv import child_pythonpath

QUAD = ROOT / "problems" / "mmul" / "demo"
QUAD_STORE = "if (r1 < DIM_M && c1 < DIM_N) C[(size_t)r1 * DIM_N + c1] = acc11;"
QUAD_BAD_STORE = "if (r1 < DIM_M && c1 < DIM_N) C[(size_t)r1 * DIM_N + c0] = acc11;"


def session(problem: Path, wrong: str, spec: str, fix: tuple[str, str], extra_validate: bool = False) -> None:
    """analyze, one strategy, a plan, then the authoring story (one iteration: no propose, no decide)."""
    b = "b1-quad"
    old, new = fix
    end = ("end_step", {"summary": "2x2 outputs per thread; the store of acc11 fixed after validate."})
    last = [("validate", {}), ("validate", {})] if extra_validate else [end]  # two more: the 4th is refused
    lines = [
        text(None, None, "analyze", "A product; tile it."),
        structured(None, None, "strategize", {"strategies": [
            {"name": "quad", "title": "2x2 outputs per thread", "description": "shared tiles, 2x2 outputs"}]}),
        text(b, 1, "plan", "Shared tiles, 2x2 outputs per thread."),
        tools(b, 1, "author", [("write_file", {"path": "kernels.cu", "content": wrong}),
                               ("write_file", {"path": "tuning.yaml", "content": spec}),
                               ("check_compilation", {}), ("validate", {})]),
        tools(b, 1, "author", [("edit_file", {"path": "kernels.cu", "old_text": old, "new_text": new}),
                               ("check_compilation", {}), ("validate", {})]),
        tools(b, 1, "author", last),
    ]  # fmt: skip
    if extra_validate:
        lines.append(tools(b, 1, "author", [end]))
    demo = DemoSession("mmul", problem / "demo", note="test session (tests/engine/test_validate_tool.py)")
    (problem / "session.jsonl").write_text(demo.render(lines), encoding="utf-8")


def tool_results(layout: RunLayout, branch: str = "b1-quad") -> list[dict]:
    folder = layout.branch(branch).iteration(1).llm
    last = sorted(folder.glob("author_*.json"))[-1]
    return [m for m in json.loads(last.read_text())["messages"] if m["role"] == "tool"]


def test_a_wrong_kernel_is_found_and_fixed_within_the_authoring_step(mmul_dir: Path) -> None:
    wrong = kernel_source(1.0, "// FAKE_WRONG_AT: 17\n")
    session(mmul_dir, wrong, SPEC, ("// FAKE_WRONG_AT: 17\n", ""), extra_validate=True)
    provider = build_provider(ProviderChoice(provider="replay", model="replay", source="test"),
                              replay_from=mmul_dir / "session.jsonl")  # fmt: skip
    tuner = FakeGpuTuner()
    engine = make_engine(mmul_dir, provider, tuner=tuner, max_iter=1, n_strategies=1)  # validate_uses: 3
    finished = asyncio.run(engine.run())
    assert finished.status == "ok", finished
    layout = RunLayout(mmul_dir)
    results = [m["content"] for m in tool_results(layout) if m["content"].startswith("validate")]
    assert results[0].startswith("validate: NOT VALID: P=1 on shape default: validation_failed")
    assert "4,079/4,096 elements wrong" not in results[0]  # the reason already says how many
    assert "C: 4079 of 4096 element(s) differ" in results[0] and "first bad index 17" in results[0]
    assert "e.g. [17] expected 1 got 0; [18] expected 1 got 0" in results[0]
    assert results[1].startswith("validate: VALID on both input sets for P=1")
    assert results[2].startswith("validate: VALID") and "used 3 times in this step (the limit)" in results[3]
    st = read_model(layout.branch("b1-quad").iteration(1).state, IterState)
    assert st.author is not None and st.author.ok and st.author.validations == 3
    assert [v["config"] for v in tuner.validated] == [{"P": 1}] * 3  # the config the check compiled
    assert "FAKE_WRONG_AT" not in layout.branch("b1-quad").iteration(1).kernel.read_text()


def test_validate_reports_and_tuner_lines_carry_the_same_detail() -> None:
    v = ValidationReport(buffer="C", max_abs_error=2.0, first_bad_index=5, bad_count=12, checked=64,
                         samples=[Mismatch(index=5, expected=2.0, got=None), Mismatch(index=9, expected=1, got=3)],
                         input_set=1)  # fmt: skip
    r = ConfigResult(index=7, config={"T": 8}, status="validation_failed", error="wrong", validation=v)
    line = result_line(r)
    assert "12/64 elements wrong" in line and "on the fresh input set" in line
    assert "e.g. [5] expected 2 got NaN/Inf; [9] expected 1 got 3" in line
    report = report_text(ValidateReport(ok=False, config={"T": 8}, shapes=[r]))
    assert report.startswith("validate: NOT VALID: T=8 on shape default: validation_failed: wrong")
    assert "12/64 elements wrong" in report and "[9] expected 1 got 3" in report
    assert config_argument('{"T": 8}') == {"T": 8} and config_argument(None) is None
    for bad in ([1, 2], {"T": [1]}, {"T": True}, "x" * 5000):
        with pytest.raises(Exception, match="validate"):
            config_argument(bad)


@pytest.mark.gpu
def test_on_the_gpu_a_wrong_store_is_found_by_validate_in_the_authoring_step(tmp_path: Path) -> None:
    """The mmul 'quad' kernel with acc11 stored at the wrong column: ktt validate on the GPU finds
    it before the step ends, the fix validates, and the tuned kernel is valid."""
    problem = tmp_path / "mmul"
    shutil.copytree(ROOT / "problems" / "mmul", problem, ignore=shutil.ignore_patterns("output", "archive"))
    good = (QUAD / "7_quad.cu").read_text()
    session(problem, good.replace(QUAD_STORE, QUAD_BAD_STORE), (QUAD / "7_quad.yaml").read_text(),
            (QUAD_BAD_STORE, QUAD_STORE))  # fmt: skip
    argv = [sys.executable, "-m", "cacao_tui", "--dir", str(problem), "--provider", "replay", "--no-ui",
            "--strategies", "1", "--max-iter", "1", "--timeout", "4"]  # fmt: skip
    done = subprocess.run(argv, cwd=tmp_path, env={**os.environ, "PYTHONPATH": child_pythonpath()},
                          capture_output=True, text=True, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    layout = RunLayout(problem)
    results = [m["content"] for m in tool_results(layout) if m["content"].startswith("validate")]
    assert results[0].startswith("validate: NOT VALID"), results
    assert "elements wrong" in results[0] or "element(s) differ" in results[0]
    assert "expected" in results[0] and "got" in results[0]  # the (index, expected, got) samples
    assert results[1].startswith("validate: VALID on both input sets"), results
    st = read_model(layout.branch("b1-quad").iteration(1).state, IterState)
    assert st.author is not None and st.author.validations == 2
    assert st.run is not None and st.run.best_ms is not None and not st.run.by_status.get("validation_failed")
    device = json.loads(layout.device.read_text())
    assert device["copy_bandwidth_gbs"] > 100 and device["sm_count"] > 0  # measured once, on the GPU
