"""The search policy (issue 21): an iteration builds on the branch's best, the run's iteration pool
moves iterations to the branches that improve, a polish iteration spends what is left on the run's
best kernel, and the same kernel is never tuned twice. Run on the scripted FAKE model and the FAKE
tuner (times from FAKE_TIME_MS markers)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from cacao_tui.engine.policy import (
    FIRST_RESULT_GAIN,
    Standing,
    grant_extra,
    recent_gain,
    start_iteration,
)
from cacao_tui.engine.pool import IterationPool
from cacao_tui.store.atomic import read_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import BranchManifest, Decision, IterState, PoolState
from tests.engine.conftest import make_engine
from tests.engine.scenario import SPEC, Scenario, kernel_source
from tests.fake_tuner import FakeTuner


def run(engine):  # type: ignore[no-untyped-def]
    return asyncio.run(engine.run())


def state(problem: Path, branch: str, i: int) -> IterState:
    return read_model(RunLayout(problem).branch(branch).iteration(i).state, IterState)


def manifest(problem: Path, branch: str) -> BranchManifest:
    return read_model(RunLayout(problem).branch(branch).manifest, BranchManifest)


# -- the rules -------------------------------------------------------------------------------


def test_the_next_iteration_starts_from_the_best_unless_the_decision_names_the_latest() -> None:
    go_on = Decision(action="continue", reason="x")
    assert start_iteration(latest=3, best=1, decision=go_on) == 1
    assert start_iteration(latest=3, best=3, decision=go_on) == 3
    assert start_iteration(latest=3, best=None, decision=go_on) == 3  # nothing timed yet
    assert start_iteration(latest=3, best=1, decision=Decision(action="retry", reason="fix")) == 3
    assert start_iteration(latest=3, best=1, decision=go_on.model_copy(update={"skip_implement": True})) == 3
    assert start_iteration(latest=3, best=1, decision=go_on.model_copy(update={"start_from": "latest"})) == 3


def test_recent_gain_measures_the_last_iterations() -> None:
    assert recent_gain([]) == 0.0 and recent_gain([None, None]) == 0.0
    assert recent_gain([2.0]) == FIRST_RESULT_GAIN  # a first result is a gain
    assert recent_gain([4.0, 2.0, 1.0]) == 3.0  # 4 ms before the window, 1 ms now
    assert recent_gain([1.0, 2.0, 1.5]) == 0.0  # no better than before the window: a stall


def test_a_spare_iteration_goes_to_an_improving_branch_that_nobody_more_promising_needs() -> None:
    me = Standing("a", live=True, claim=0, gain=0.5, decided=3, best_ms=1.5, run_best_ms=1.0)
    stalled = Standing("b", live=True, claim=2, gain=0.0, decided=3, best_ms=1.0, run_best_ms=1.0)
    young = Standing("c", live=True, claim=2, gain=1.0, decided=1, best_ms=1.2, run_best_ms=1.0)
    done = Standing("d", live=False, claim=0, gain=0.9, decided=2, best_ms=1.1, run_best_ms=1.0)
    assert me.score == 1.0 and young.score == 0.6  # where one more iteration at the recent pace leads
    assert grant_extra(me, [me, done], left=1)
    assert not grant_extra(Standing("a", True, 0, 0.01, 3, 1.5, 1.0), [done], left=5)  # not improving
    assert grant_extra(me, [me, stalled], left=1)  # a stalled branch's share is not held for it
    assert not grant_extra(me, [me, young], left=2)  # held for the young branch, which may still use it
    assert not grant_extra(me, [me, young], left=3)  # the young one is more promising: it may ask first
    assert grant_extra(me, [me, young], left=4)  # two held for it, one for it to ask, one free


def test_a_hopeless_branch_yields_to_one_that_can_use_its_iterations() -> None:
    from cacao_tui.engine.policy import should_yield

    weak = Standing("w", live=True, claim=3, gain=0.1, decided=2, best_ms=3.0, run_best_ms=1.0)
    strong = Standing("s", live=True, claim=1, gain=0.3, decided=2, best_ms=1.0, run_best_ms=1.0)
    assert weak.hopeless and not strong.hopeless
    assert should_yield(weak, [weak, strong]) and not should_yield(strong, [weak, strong])
    assert not should_yield(weak, [weak])  # nobody to give them to: it goes on
    assert not Standing("y", True, 3, 0.0, 1, 3.0, 1.0).hopeless  # one result is too early to judge
    assert grant_extra(strong, [weak, strong], left=1)  # the weak branch's share is not held for it


def test_the_pool_draws_once_per_iteration_and_returns_what_a_branch_leaves(tmp_path: Path) -> None:
    path = tmp_path / "pool.json"
    pool = IterationPool(4, path)
    pool.register("a", 2)
    pool.register("b", 2)
    assert pool.begin("a", 1) and pool.begin("a", 1) and pool.used() == 1  # idempotent (a resume)
    assert pool.promise_next("a", within_allowance=True) and pool.used() == 2
    assert pool.begin("a", 2) and pool.used() == 2  # the reservation is what it drew
    assert pool.begin("b", 1) and pool.left() == 1
    pool.finish("b")  # b ends after one iteration: one of its share is free again
    me = Standing("a", live=True, claim=0, gain=0.5, decided=2, best_ms=1.0, run_best_ms=1.0)
    assert pool.promise_next("a", within_allowance=False, me=me, others=[me]) and pool.branch("a").grants == 1
    again = IterationPool(99, path)  # a resume reads it back (without --budget-iters: its own total)
    assert again.total == 4 and again.branch("a").grants == 1 and again.branch("a").reserved and again.left() == 0
    assert IterationPool(6, path, resume_total=6).total == 6  # --resume --budget-iters 6


def test_a_draw_on_a_reservation_is_not_written_and_a_resume_finds_it_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "pool.json"
    pool = IterationPool(3, path)
    pool.register("a", 3)
    assert pool.begin("a", 1) and pool.promise_next("a", within_allowance=True, after=1)
    before = path.read_bytes()
    assert pool.begin("a", 2) and pool.branch("a").drawn == [1, 2] and not pool.branch("a").reserved
    assert path.read_bytes() == before  # no fsync'd write: used() did not change
    # Killed here: pool.json still says "reserved after 1"; iteration 2 has begun on disk.
    not_begun = IterationPool(3, path)
    not_begun.reconcile("a", [1])  # killed before iteration 2 began: the reservation stays
    assert not_begun.branch("a").reserved and not_begun.branch("a").drawn == [1] and not_begun.left() == 1
    resumed = IterationPool(3, path)
    resumed.reconcile("a", [1, 2])
    b = resumed.branch("a")
    assert b.drawn == [1, 2] and not b.reserved and resumed.used() == 2 and resumed.left() == 1
    assert IterationPool(3, path).branch("a").drawn == [1, 2]  # written by the reconciliation
    assert resumed.promise_next("a", within_allowance=True, after=2) and resumed.left() == 0


# -- in the engine -------------------------------------------------------------------------------


def test_after_a_slower_iteration_the_work_goes_on_from_the_best(mmul_dir: Path) -> None:
    times = {1: 1.0, 2: 2.0, 3: 0.5}
    scenario = Scenario(strategies=["alpha"], time_ms=lambda b, i: times[i])
    run(make_engine(mmul_dir, scenario.provider(), max_iter=3, n_strategies=1))
    assert [state(mmul_dir, "b1-alpha", i).base_iteration for i in (1, 2, 3)] == [None, 1, 1]
    author = next(r for r in scenario.requests if r.key.node == "author" and r.key.iteration == 3)
    text = "\n\n".join(m.content for m in author.messages)  # the stable prefix, then the task
    assert "Current files, from iteration 1 of this branch, the branch's best so far (1 ms; the latest, " \
        "iteration 2: 2 ms)" in text
    assert "FAKE_TIME_MS: 1.0" in text and "FAKE_TIME_MS: 2.0" not in text


def test_a_retry_and_a_decision_for_the_latest_start_from_the_latest(mmul_dir: Path) -> None:
    times = {1: 1.0, 2: 2.0, 3: 3.0, 4: 0.5}
    actions = {1: {"action": "continue", "reason": "x"}, 2: {"action": "retry", "reason": "fix it"},
               3: {"action": "continue", "reason": "x", "start_from": "latest"}}  # fmt: skip
    scenario = Scenario(strategies=["alpha"], time_ms=lambda b, i: times[i], decide=lambda b, i: actions[i])
    run(make_engine(mmul_dir, scenario.provider(), max_iter=4, n_strategies=1))
    assert [state(mmul_dir, "b1-alpha", i).base_iteration for i in (2, 3, 4)] == [1, 2, 3]


def _beta_stops(branch: str, iteration: int) -> dict:
    if branch == "b1-beta":
        return {"action": "stop", "reason": "a dead end"}
    return {"action": "continue", "reason": "it improves"}


def test_the_pool_moves_a_stopped_branchs_iterations_to_the_improving_one(mmul_dir: Path) -> None:
    # One branch at a time, beta first: it stops after one iteration, then alpha runs (2 / iteration ms).
    scenario = Scenario(strategies=["beta", "alpha"], decide=_beta_stops)
    run(make_engine(mmul_dir, scenario.provider(), max_iter=3, n_strategies=2, concurrency=1))
    alpha, beta = manifest(mmul_dir, "b2-alpha"), manifest(mmul_dir, "b1-beta")
    assert beta.iterations_done == 1 and beta.status == "stopped"
    # alpha's share is 3; beta left 2 of its 3 in the pool of 6, and alpha got them (a polish has none left).
    assert alpha.iterations_done == 5 and alpha.best is not None and alpha.best.iteration == 5
    pool = read_model(RunLayout(mmul_dir).pool, PoolState)
    assert pool.branches["b2-alpha"].grants == 2 and sum(len(b.drawn) for b in pool.branches.values()) == 6
    assert RunLayout(mmul_dir).branch_names() == ["b1-beta", "b2-alpha"]
    decide_prompt = next(r for r in scenario.requests if r.key.node == "decide" and r.key.iteration == 4)
    assert "Iterations used: 4 of 5" in decide_prompt.messages[-1].content


def test_a_branch_that_stalls_gets_nothing_from_the_pool(mmul_dir: Path) -> None:
    slower = lambda b, i: (1.0 if b == "b2-alpha" else 2.0) + i / 10  # noqa: E731 - alpha gets worse
    scenario = Scenario(strategies=["beta", "alpha"], time_ms=slower, decide=_beta_stops)
    run(make_engine(mmul_dir, scenario.provider(), max_iter=3, n_strategies=2, concurrency=1))
    assert manifest(mmul_dir, "b2-alpha").iterations_done == 3  # no gain: no grant
    # The iterations left went to a polish of the run's best kernel instead.
    polish = manifest(mmul_dir, "b2-alpha.polish")
    assert polish.polish and polish.parent == "b2-alpha" and polish.parent_iteration == 1
    assert state(mmul_dir, "b2-alpha.polish", 1).mode == "polish"


def test_the_polish_iteration_starts_from_the_runs_best_kernel(mmul_dir: Path) -> None:
    scenario = Scenario(strategies=["alpha", "beta"], time_ms=lambda b, i: {"b1-alpha": 3.0}.get(b, 1.0) / i,
                        decide=lambda b, i: {"action": "stop", "reason": "enough"})  # fmt: skip
    finished = run(make_engine(mmul_dir, scenario.provider(), max_iter=3, n_strategies=2))
    assert finished.status == "ok"
    layout = RunLayout(mmul_dir)
    assert sorted(layout.branch_names()) == ["b1-alpha", "b2-beta", "b2-beta.polish"]
    st = state(mmul_dir, "b2-beta.polish", 1)
    assert st.mode == "polish" and st.decision is not None and st.decision.automatic  # one iteration, no decide
    author = next(r for r in scenario.requests if r.key.branch == "b2-beta.polish" and r.key.node == "author")
    text = "\n\n".join(m.content for m in author.messages)  # the stable prefix, then the task
    assert "Task: the polish iteration." in text and "the parent branch b2-beta, iteration 1" in text
    assert not any(r.key.branch == "b2-beta.polish" and r.key.node in ("plan", "propose", "decide")
                   for r in scenario.requests)  # fmt: skip
    assert read_model(layout.pool, PoolState).polish == "b2-beta.polish"
    # A dry run times nothing: no best, no polish.
    other = mmul_dir.parent / "again"
    import shutil

    shutil.copytree(mmul_dir, other, ignore=shutil.ignore_patterns("output"))
    run(make_engine(other, Scenario(strategies=["alpha"]).provider(), n_strategies=1, dry_run=True))
    assert RunLayout(other).branch_names() == ["b1-alpha"]


def test_the_same_kernel_is_tuned_once_in_a_run(mmul_dir: Path) -> None:
    same = kernel_source(1.25, "// written the same way by both branches\n")
    spaced = same.replace("{ C[0]", "{\n    C[0]").replace("// written the same way", "/* laid out */ // the same")

    def author(branch: str, iteration: int, index: int) -> dict:
        source = same if branch == "b1-alpha" else spaced
        if index == 0:
            return {"tool_calls": [
                {"id": "w", "name": "write_file", "arguments": {"path": "kernels.cu", "content": source}},
                {"id": "s", "name": "write_file", "arguments": {"path": "tuning.yaml", "content": SPEC}},
                {"id": "c", "name": "check_compilation", "arguments": {}}]}  # fmt: skip
        return {"tool_calls": [{"id": "e", "name": "end_step", "arguments": {"summary": "done"}}]}

    tuner = FakeTuner()
    scenario = Scenario(strategies=["alpha", "beta"], author_script=author,
                        decide=lambda b, i: {"action": "stop", "reason": "x"})  # fmt: skip
    run(make_engine(mmul_dir, scenario.provider(), n_strategies=2, tuner=tuner, budget_iters=2))
    assert tuner.calls.count("tune") == 1  # beta's identical files (comments and layout aside) were not tuned
    a, b = state(mmul_dir, "b1-alpha", 1), state(mmul_dir, "b2-beta", 1)
    first, second = (a, b) if b.duplicate_of else (b, a)
    assert second.duplicate_of is not None and second.fingerprint == first.fingerprint
    assert second.run is not None and second.run.best_ms == 1.25 and "not tuned again" in (second.run.message or "")
    assert RunLayout(mmul_dir).branch(second.branch).iteration(1).tune_summary.is_file()  # its tuner output too


# -- in a replay, killed and resumed -----------------------------------------------------------------


def _pool_session(problem: Path) -> None:
    """A recorded session (written here, by hand): beta stops after one iteration; alpha improves
    with every iteration and has answers for five (its share is three)."""
    from cacao_tui.llm.demo_session import DemoSession, decision, structured, text, tools

    demo = DemoSession("mmul", problem / "demo", note="test session (tests/engine/test_search_policy.py)")
    strategies = [{"name": n, "title": f"Strategy {n}", "description": f"do {n}"} for n in ("beta", "alpha")]
    lines = [text(None, None, "analyze", "A product; tile it."), structured(None, None, "strategize",
             {"strategies": strategies})]  # fmt: skip
    for branch, iterations, ms in (("b1-beta", 1, 3.0), ("b2-alpha", 5, 2.0)):
        lines.append(text(branch, 1, "plan", f"plan of {branch}"))
        for i in range(1, iterations + 1):
            source = kernel_source(ms / i, f'#define FAKE_BRANCH "{branch}"\n')
            lines += [
                tools(branch, i, "author", [("write_file", {"path": "kernels.cu", "content": source}),
                      ("write_file", {"path": "tuning.yaml", "content": SPEC}), ("check_compilation", {})]),
                tools(branch, i, "author", [("end_step", {"summary": f"iteration {i}"})]),
                text(branch, i, "propose", "go on"),
                decision(branch, i, "stop" if branch == "b1-beta" else "continue", "as planned", f"iter {i}"),
            ]  # fmt: skip
    (problem / "session.jsonl").write_text(demo.render(lines), encoding="utf-8")


def test_the_pool_moves_iterations_in_a_replay_and_survives_a_kill_and_resume(mmul_dir: Path) -> None:
    import json
    import os
    import subprocess
    import sys

    from tests.engine.conftest import ROOT

    _pool_session(mmul_dir)
    argv = [sys.executable, "-m", "tests.engine.harness", str(mmul_dir), "--max-iter", "3", "--strategies", "2",
            "--concurrency", "1"]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    # Killed while alpha's fourth iteration (its first from the pool's grants) is being written.
    first = subprocess.run([*argv, "--kill-when", "b2-alpha:4:implementing"], capture_output=True, text=True,
                           cwd=ROOT, env=env, timeout=240)  # fmt: skip
    assert first.returncode == -9, first.stdout[-2000:] + first.stderr[-2000:]
    layout = RunLayout(mmul_dir)
    pool = read_model(layout.pool, PoolState)
    alpha = pool.branches["b2-alpha"]
    # Iteration 4 began on the reservation iteration 3 made: counted the same, so not written yet.
    assert pool.total == 6 and alpha.grants == 1 and alpha.drawn == [1, 2, 3] and alpha.reserved_after == 3
    assert pool.branches["b1-beta"].finished and pool.branches["b1-beta"].drawn == [1]

    second = subprocess.run([*argv, "--resume"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=240)
    assert second.returncode == 0 and "FINISHED ok" in second.stdout, second.stdout[-2000:] + second.stderr[-2000:]
    pool = read_model(layout.pool, PoolState)
    alpha = manifest(mmul_dir, "b2-alpha")
    assert alpha.iterations_done == 5 and alpha.status == "done" and pool.branches["b2-alpha"].grants == 2
    assert sum(len(b.drawn) for b in pool.branches.values()) == 6 and pool.polish is None
    assert any("one more iteration from the pool" in e for e in pool.events)
    json.loads(layout.pool.read_text())  # whole, after the kill


def test_a_weak_branch_yields_its_iterations_to_the_strong_one(mmul_dir: Path) -> None:
    times = lambda b, i: 1.0 / i if b == "b1-alpha" else 3.0 - i / 10  # noqa: E731 - beta: slow and stalling
    scenario = Scenario(strategies=["alpha", "beta"], time_ms=times)
    run(make_engine(mmul_dir, scenario.provider(), max_iter=3, n_strategies=2, concurrency=2))
    alpha, beta = manifest(mmul_dir, "b1-alpha"), manifest(mmul_dir, "b2-beta")
    assert beta.iterations_done == 2 and beta.status == "done", beta.stop_reason
    assert alpha.iterations_done > 3  # it got what beta left
    pool = read_model(RunLayout(mmul_dir).pool, PoolState)
    assert any(e.startswith("b2-beta yields") for e in pool.events), pool.events
    # beta's last iteration was its last: no propose and no decide were asked for it.
    assert not any(r.key.branch == "b2-beta" and r.key.iteration == 2 and r.key.node in ("propose", "decide")
                   for r in scenario.requests)  # fmt: skip


def test_a_resumed_run_of_an_earlier_version_counts_what_its_branches_ran(mmul_dir: Path) -> None:
    run(make_engine(mmul_dir, Scenario(strategies=["alpha"]).provider(), max_iter=2, n_strategies=1))
    layout = RunLayout(mmul_dir)
    layout.pool.unlink()  # as a run written before the pool existed
    engine = make_engine(mmul_dir, Scenario(strategies=["alpha"]).provider(), max_iter=2, n_strategies=1,
                         resumed=True)  # fmt: skip
    assert engine.pool.branch("b1-alpha").drawn == [1, 2] and engine.pool.left() == 0
