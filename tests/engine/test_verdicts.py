"""The run's verdict follows from what it produced (issue 30): ``run ok`` only when a kernel was
timed (in a dry run: compile-checked and kept), ``run failed: <why>`` otherwise, in the event,
final_results.json, the headless output and the exit status; a replay that outruns its recording
ends its branches as ``recording ended`` and creates no branch only to fail. With the scripted
FAKE model and the FAKE tuner; the command-line cases run the real command on a replay."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cacao_tui.engine.events import BranchStatusChanged, DecisionMade, EventBus
from cacao_tui.llm import ProviderChoice
from cacao_tui.llm.factory import build_provider
from cacao_tui.runs.last_run import last_run
from cacao_tui.store.atomic import read_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import BranchManifest, FinalResults
from cacao_tui.suite.collect import collect_row
from tests.engine.conftest import ROOT, make_engine
from tests.engine.scenario import Scenario
from tests.pathenv import child_pythonpath

REFUSAL = "I'm sorry, but I can't help with that."


def manifests(problem: Path) -> dict[str, BranchManifest]:
    layout = RunLayout(problem)
    return {n: read_model(layout.branch(n).manifest, BranchManifest) for n in layout.branch_names()}


def final(problem: Path) -> FinalResults:
    return read_model(RunLayout(problem).final_results, FinalResults)


def refusing() -> Scenario:
    """A model that refuses every request (the scripted FAKE)."""
    scenario = Scenario(strategies=["alpha"])
    scenario.respond = lambda request: REFUSAL  # type: ignore[method-assign]
    return scenario


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_model_that_refuses_everything_fails_the_run(mmul_dir: Path, dry_run: bool) -> None:
    engine = make_engine(mmul_dir, refusing().provider(), max_iter=1, n_strategies=1, dry_run=dry_run)
    finished = asyncio.run(engine.run())
    assert finished.status == "failed", finished
    assert finished.message is not None and finished.message.startswith("every step was refused by the model")
    results = final(mmul_dir)
    assert results.run_status == "failed" and results.run_message == finished.message and results.best is None


def test_the_refusing_model_through_the_command_exits_non_zero(mmul_dir: Path, tmp_path: Path) -> None:
    """A recording of a model that refused every request, replayed by the real command: run failed, exit 1."""
    recorded = tmp_path / "recorded"
    shutil.copytree(mmul_dir, recorded)
    asyncio.run(make_engine(recorded, refusing().provider(), max_iter=1, n_strategies=1, dry_run=True).run())
    done = subprocess.run(
        [sys.executable, "-m", "cacao_tui", "--dir", str(mmul_dir), "--provider", "replay", "--from",
         str(recorded / "output"), "--no-ui", "--dry-run", "--max-iter", "1", "--strategies", "1"],
        capture_output=True, text=True, cwd=tmp_path, env={"PYTHONPATH": child_pythonpath(), "PATH": "/usr/bin:/bin"},
        timeout=240,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    assert "\nrun failed: every step was refused by the model" in done.stdout, done.stdout[-2000:]
    assert "run ok" not in done.stdout and "Traceback" not in done.stderr
    assert final(mmul_dir).run_status == "failed"
    # --best, the home screen and cacao collect say the same.
    env = {"PYTHONPATH": child_pythonpath(), "PATH": "/usr/bin:/bin"}
    best = subprocess.run([sys.executable, "-m", "cacao_tui", "--dir", str(mmul_dir), "--best", "--no-ui"],
                          capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    assert "\nrun        failed: every step was refused by the model" in best.stdout, best.stdout
    home = last_run(mmul_dir)
    assert home.status == "failed" and (home.message or "").startswith("every step was refused by the model")
    assert collect_row(mmul_dir).status == "failed (dry run)"


def test_a_dry_run_that_compiles_a_kernel_is_ok(mmul_dir: Path) -> None:
    engine = make_engine(mmul_dir, Scenario(strategies=["alpha"]).provider(), max_iter=1, n_strategies=1, dry_run=True)
    finished = asyncio.run(engine.run())
    assert finished.status == "ok" and finished.message is None
    assert final(mmul_dir).run_status == "ok"


def test_every_branch_failing_fails_the_run(mmul_dir: Path) -> None:
    scenario = Scenario(strategies=["alpha", "beta"], fail_nodes={(None, "plan")})
    finished = asyncio.run(make_engine(mmul_dir, scenario.provider(), max_iter=2, n_strategies=2).run())
    assert finished.status == "failed"
    assert finished.message is not None and finished.message.startswith("every branch failed: ")
    assert "scripted failure in plan" in finished.message


def test_the_llm_budget_spent_before_a_kernel_fails_the_run(mmul_dir: Path) -> None:
    scenario = Scenario(strategies=["alpha"])
    answer = scenario.respond

    def costly(request):  # type: ignore[no-untyped-def]  # every reply counts 1,000 tokens
        reply = answer(request)
        return {**(reply if isinstance(reply, dict) else {"text": reply}), "usage": {"input_tokens": 1000}}

    scenario.respond = costly  # type: ignore[method-assign]
    engine = make_engine(mmul_dir, scenario.provider(), max_iter=2, n_strategies=1)
    engine.deps.llm.budget_tokens = 3500  # the master's two calls and the plan: spent in the authoring
    finished = asyncio.run(engine.run())
    assert finished.status == "failed"
    assert finished.message is not None and "LLM budget was spent before any kernel was timed" in finished.message


def test_nothing_valid_fails_the_run_and_says_so(mmul_dir: Path) -> None:
    def author(branch: str, iteration: int, index: int) -> dict | None:
        if index == 0:
            return {"tool_calls": [
                {"id": "w", "name": "write_file", "arguments": {"path": "kernels.cu",
                 "content": "// FAKE_NO_VALID\nextern \"C\" __global__ void k(float* C) { C[0] = 1.0f; }\n"}},
                {"id": "s", "name": "write_file", "arguments": {"path": "tuning.yaml", "content":
                 "tune_params:\n  P: [1]\nlaunches:\n  - kernel: k\n    grid: {x: 1}\n    block: {x: P}\n"}},
            ]}  # fmt: skip
        return None

    scenario = Scenario(strategies=["alpha"], author_script=author, decide=lambda b, i: {"action": "stop",
                                                                                        "reason": "enough"})
    finished = asyncio.run(make_engine(mmul_dir, scenario.provider(), max_iter=2, n_strategies=1).run())
    assert finished.status == "failed" and finished.message == "no kernel passed validation", finished


def test_iteration_counts_rise_as_iterations_are_decided(mmul_dir: Path) -> None:
    """The branch's count goes up with each decision, not only when the branch ends."""
    bus = EventBus()
    seen: list[tuple[str, int, int]] = []  # (event, iteration decided or count, ...) in order
    bus.subscribe(
        lambda e: seen.append(("decided", e.iteration, 0)) if isinstance(e, DecisionMade)
        else seen.append(("count", e.iterations_done, 0)) if isinstance(e, BranchStatusChanged) else None
    )  # fmt: skip
    engine = make_engine(mmul_dir, Scenario(strategies=["alpha"]).provider(), bus=bus, max_iter=3, n_strategies=1)
    asyncio.run(engine.run())
    counts = [n for kind, n, _ in seen if kind == "count"]
    first_decided = next(i for i, (kind, _, _) in enumerate(seen) if kind == "decided")
    second_decided = [i for i, (kind, _, _) in enumerate(seen) if kind == "decided"][1]
    # After iteration 1's decision and before iteration 2's, the branch says 1 done.
    assert ("count", 1, 0) in seen[first_decided:second_decided], seen
    assert counts == sorted(counts) and counts[-1] == 3


# -- replays that outrun their recording ---------------------------------------------------


def _replay(problem: Path, source: Path):  # type: ignore[no-untyped-def]
    return build_provider(ProviderChoice(provider="replay", model="replay", source="test"), replay_from=source)


def test_a_dry_run_recording_replayed_with_timing_runs_to_its_end(mmul_dir: Path, tmp_path: Path) -> None:
    """The recording of a dry run (two branches, two iterations each; beta stops after one), replayed
    where kernels are timed (the FAKE tuner): alpha improves, so the run's iteration pool grants it
    one more than its share, and the run's best invites a polish, neither of which the recording
    holds. Alpha ends as `recording ended` where its recording does (its second iteration keeps its
    timing), nothing fails, no polish branch is created, and the run is ok, saying how far the
    recording reached."""
    recorded = tmp_path / "recorded"
    shutil.copytree(mmul_dir, recorded)

    def decide(branch: str, iteration: int) -> dict:
        return {"action": "stop", "reason": "enough"} if branch.endswith("beta") else {"action": "continue",
                                                                                          "reason": "more"}

    scenario = Scenario(strategies=["alpha", "beta"], decide=decide)
    first = make_engine(recorded, scenario.provider(), max_iter=2, n_strategies=2, dry_run=True)
    assert asyncio.run(first.run()).status == "ok"
    assert not RunLayout(recorded).branch("b1-alpha").iteration(2).llm.joinpath("propose_000.json").exists()

    engine = make_engine(mmul_dir, _replay(mmul_dir, recorded / "output"), max_iter=2, n_strategies=2)
    logs: list[str] = []
    engine.bus.subscribe(lambda e: logs.append(getattr(e, "message", "") or ""))
    finished = asyncio.run(engine.run())
    ms = manifests(mmul_dir)
    assert sorted(ms) == ["b1-alpha", "b2-beta"]  # no polish branch
    assert any("no polish: the recording holds no call of b1-alpha.polish" in line for line in logs)
    alpha = ms["b1-alpha"]
    assert alpha.status == "stopped"
    assert alpha.stop_reason == "recording ended: no recorded propose call for iteration 2"
    assert alpha.iterations_done == 2 and alpha.best is not None and alpha.best.iteration == 2
    assert ms["b2-beta"].status == "stopped" and ms["b2-beta"].stop_reason == "enough"
    assert finished.status == "ok" and finished.best_ms is not None
    assert finished.message is not None and finished.message.startswith("the recording ended (")
    assert "recorded calls replayed; b1-alpha: no recorded propose call for iteration 2)" in finished.message
    assert final(mmul_dir).run_status == "ok"


def test_a_recording_that_ends_before_any_kernel_fails_the_run(mmul_dir: Path, tmp_path: Path) -> None:
    """A session that holds the master's calls and the plans only: run failed, the recording named."""
    entries = [json.loads(line) for line in (ROOT / "problems" / "mmul" / "session.jsonl").read_text().splitlines()
               if line.strip()]  # fmt: skip
    kept = [e for e in entries if e.get("node") in ("analyze", "strategize", "plan")]
    assert kept and len(kept) < len(entries)
    short = tmp_path / "short.jsonl"
    short.write_text("".join(json.dumps(e) + "\n" for e in kept))
    engine = make_engine(mmul_dir, _replay(mmul_dir, short), max_iter=5, max_depth=2, n_strategies=4, dry_run=True)
    finished = asyncio.run(engine.run())
    assert finished.status == "failed", finished
    assert (finished.message or "").startswith("no kernel was written before the recording ended")
    ms = manifests(mmul_dir)
    assert all(m.status == "stopped" and (m.stop_reason or "").startswith("recording ended") for m in ms.values())
