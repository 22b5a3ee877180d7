"""The original CACAO's files beside our state under output/ (run.log, token_usage.json,
run_meta.json, strategies.json, analysis.md, the per-branch and per-iteration keys), read the
way its collect_results.py reads them (tests/compat/original_collector.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cacao_tui.engine.events import LLMCallEvent, LogLine, RunFinished, RunStarted
from cacao_tui.engine.original_files import OriginalFiles
from cacao_tui.engine.totals import record_paths
from cacao_tui.headless import HeadlessRenderer
from cacao_tui.llm.types import Usage
from cacao_tui.store.atomic import read_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import BranchManifest, FinalResults, IterState, MasterState
from tests.compat.original_collector import collect
from tests.ui.test_day_tmux import fake_measuring_env

REPO = Path(__file__).resolve().parents[2]
STAMPED = re.compile(r"^\[\d\d:\d\d:\d\d\] [ℹ✓⚠✗•] ")


@pytest.fixture(scope="module")
def measured_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The mmul demo session, replayed and measured by the FAKE tuner (no GPU), through the real command."""
    tmp = tmp_path_factory.mktemp("original_files")
    problem = tmp / "mmul"
    shutil.copytree(REPO / "problems" / "mmul", problem, ignore=shutil.ignore_patterns("output", "archive"))
    env = {**os.environ, **fake_measuring_env(tmp)}
    argv = [sys.executable, "-m", "cacao_tui", "--dir", str(problem), "--provider", "replay", "--no-ui"]
    done = subprocess.run(argv, cwd=tmp, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return problem


def test_the_originals_collector_finds_our_times_tokens_and_gpu(measured_run: Path) -> None:
    layout = RunLayout(measured_run)
    final = read_model(layout.final_results, FinalResults)
    assert final.best is not None
    row = collect(layout.output)
    assert row["best_time_us"] == pytest.approx(final.best.time_ms * 1e3)
    best = read_model(layout.branch(final.best.branch).manifest, BranchManifest)
    assert row["iters_to_best_path"] == best.path_before + final.best.iteration
    assert row["gpu"] == "FAKE GPU (tests/ui/fake_run_site)"
    assert row["strategies_explored"] == len(layout.branch_names()) == len(final.branches)
    assert row["api_calls"] == len(record_paths(layout.output)) > 0
    assert row["tokens_total"] == row["prompt_tokens"] + row["completion_tokens"]
    tuned = valid = 0
    for name in layout.branch_names():
        for i in layout.branch(name).iteration_indices():
            st = read_model(layout.branch(name).iteration(i).state, IterState)
            tuned += st.run is not None
            valid += st.run is not None and st.run.valid > 0
    assert row["correctness_rate"] == f"{valid}/{tuned}" and 0 < valid <= tuned


def test_run_log_is_the_progress_lines_stamped(measured_run: Path) -> None:
    output = RunLayout(measured_run).output
    lines = [line for line in (output / "run.log").read_text(encoding="utf-8").splitlines() if line.strip()]
    assert all(STAMPED.match(line) for line in lines), [line for line in lines if not STAMPED.match(line)][:3]
    assert lines[0].endswith("cacao: starting mmul · replay/replay · GPU 0 FAKE GPU (tests/ui/fake_run_site) "
                             "(sm_90) · 4 strategies, 5 iterations, depth 2")  # fmt: skip
    assert "✓ ★ new run best" in "\n".join(lines)
    assert re.search(r"✓ run ok — .*final_results\.json$", lines[-1])


def test_the_masters_and_the_runs_files(measured_run: Path) -> None:
    layout = RunLayout(measured_run)
    master = read_model(layout.master, MasterState)
    assert (layout.output / "analysis.md").read_text(encoding="utf-8").strip() == (master.analysis or "").strip()
    strategies = json.loads((layout.output / "strategies.json").read_text(encoding="utf-8"))
    assert set(strategies) == {"strategies", "reasoning"}
    assert [s["name"] for s in strategies["strategies"]] == [s.name for s in master.strategies]
    for s in strategies["strategies"]:
        assert set(s) == {"name", "description", "hypothesis", "key_parameters"}
    assert json.loads((layout.output / "run_meta.json").read_text()) == {"model": "replay", "provider": "replay"}
    usage = json.loads((layout.output / "token_usage.json").read_text())
    assert set(usage) == {"api_calls", "prompt_tokens", "completion_tokens", "total_tokens"}
    context = json.loads(layout.context.read_text())
    assert context["gpu_info"] == {"model": "FAKE GPU (tests/ui/fake_run_site)"}
    for name in layout.branch_names():
        data = json.loads(layout.branch(name).manifest.read_text())
        m = BranchManifest.model_validate(data)
        expected = m.best.time_ms * 1e3 if m.best else None
        assert data["best_time_us"] == expected and data["path_iters_consumed"] == m.path_before
        for i in layout.branch(name).iteration_indices():
            state = json.loads(layout.branch(name).iteration(i).state.read_text())
            assert state["iter_num"] == i
            run = IterState.model_validate(state).run
            summary = state["results_summary"]
            if run is None:
                assert summary is None
            else:
                assert (summary["num_total"], summary["num_successful"]) == (run.evaluated, run.valid)
                assert summary["best_time_us"] == (run.best_ms * 1e3 if run.best_ms is not None else None)


def _started(**changes: object) -> RunStarted:
    base = dict(problem="p", problem_dir="/p", provider="anthropic", model="claude-opus-4-6", gpus=[0],
                max_iter=5, max_depth=2, n_strategies=4)  # fmt: skip
    return RunStarted(**{**base, **changes})


def test_lines_are_appended_as_they_happen_and_a_resume_appends(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path)
    layout.output.mkdir()
    renderer = HeadlessRenderer()
    files = OriginalFiles(layout, renderer.render)
    log = layout.output / "run.log"
    files(_started())
    assert log.read_text(encoding="utf-8").count("\n") == 1  # on disk at once, no buffering
    files(LogLine(level="warning", message="a warning", branch="b1"))
    assert log.read_text(encoding="utf-8").splitlines()[-1].endswith("⚠ b1: warning: a warning")
    usage = Usage(input_tokens=100, output_tokens=20)
    files(LLMCallEvent.model_validate({"call": {"node": "analyze", "index": 0, "provider": "anthropic",
                                                "model": "claude-opus-4-6", "usage": usage.model_dump()},
                                       "run": usage.model_dump()}))  # fmt: skip
    assert json.loads((layout.output / "token_usage.json").read_text()) == {
        "api_calls": 1, "prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}  # fmt: skip
    files(RunFinished(status="interrupted", message="stopped; continue with --resume"))
    # The resumed run: a new subscriber, the earlier calls counted on, the log appended to.
    again = OriginalFiles(layout, renderer.render)
    again(_started(resumed=True, llm_calls=1, input_tokens=100, output_tokens=20))
    lines = log.read_text(encoding="utf-8").splitlines()
    assert STAMPED.match(lines[0]) and "ℹ cacao: starting p · anthropic/claude-opus-4-6" in lines[0]
    assert "⚠ run interrupted: stopped" in "\n".join(lines)
    assert "cacao: resuming p" in lines[-1]
    assert json.loads((layout.output / "token_usage.json").read_text())["api_calls"] == 1


def test_a_secret_in_a_line_is_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-abcdefghijklmnopqrstuvwxyz0123456789")
    layout = RunLayout(tmp_path)
    layout.output.mkdir()
    OriginalFiles(layout, HeadlessRenderer().render)(
        LogLine(level="error", message="auth failed for sk-ant-abcdefghijklmnopqrstuvwxyz0123456789")
    )
    text = (layout.output / "run.log").read_text(encoding="utf-8")
    assert "abcdefghijklmnop" not in text and "✗ error: auth failed" in text
