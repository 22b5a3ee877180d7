"""Full engine runs on a scripted model and the fake tuner: the loop, branching, budgets,
retries, failures, and the control surface (pause, kill, max_iter, retry)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from pathlib import Path

from cacao_tui.engine.events import BranchAdded, DecisionMade, EventBus, NewBest, RunFinished
from cacao_tui.store.atomic import read_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import BranchConfig, BranchManifest, FinalResults, IterState, MasterState
from tests.engine.conftest import make_engine
from tests.engine.scenario import SPEC, Scenario, kernel_source
from tests.fake_tuner import FakeTuner


def run(engine) -> RunFinished:
    return asyncio.run(engine.run())


def manifests(problem_dir: Path) -> dict[str, BranchManifest]:
    layout = RunLayout(problem_dir)
    return {n: read_model(layout.branch(n).manifest, BranchManifest) for n in layout.branch_names()}


def test_full_run_writes_state_and_final_results(mmul_dir: Path) -> None:
    scenario = Scenario(strategies=["alpha", "beta"])
    bus = EventBus()
    events: list = []
    bus.subscribe(events.append)
    finished = run(make_engine(mmul_dir, scenario.provider(), bus=bus, max_iter=3))
    assert finished.status == "ok"
    ms = manifests(mmul_dir)
    assert set(ms) == {"b1-alpha", "b2-beta"}
    for m in ms.values():
        assert m.status == "done" and m.iterations_done == 3
        assert m.stop_reason == "iteration budget reached (3/3)"
        assert m.best is not None and m.best.iteration == 3  # time falls with every iteration
    layout = RunLayout(mmul_dir)
    st = read_model(layout.branch("b1-alpha").iteration(2).state, IterState)
    assert st.status == "decided" and st.proposal and st.run and st.run.ran
    # The plan is written once per branch: iteration 1 wrote it, iteration 2 did not plan again.
    assert read_model(layout.branch("b1-alpha").iteration(1).state, IterState).plan == "plan for b1-alpha #1"
    assert st.plan is None and ms["b1-alpha"].plan == "plan for b1-alpha #1"
    assert [c for c in scenario.calls if c[0] == "b1-alpha" and c[2] == "plan"] == [("b1-alpha", 1, "plan", 0)]
    # At the iteration budget (the third iteration) nothing is asked: no propose, no decide.
    last = read_model(layout.branch("b1-alpha").iteration(3).state, IterState)
    assert last.decision is not None and last.decision.automatic and last.decision.action == "stop"
    assert not [c for c in scenario.calls if c[0] == "b1-alpha" and c[1] == 3 and c[2] in ("propose", "decide")]
    assert (layout.branch("b1-alpha").iteration(2).root / "kernels.cu").exists()
    final = read_model(layout.final_results, FinalResults)
    assert final.complete and final.best is not None and final.best.time_ms == 2.0 / 3
    assert read_model(layout.master, MasterState).phase == "finished"
    assert layout.context.exists()
    # Every LLM call is recorded beside the iteration that made it.
    assert (layout.branch("b1-alpha").iteration(1).root / "llm" / "plan_000.json").exists()
    assert (layout.output / "llm" / "analyze_000.json").exists()
    # The run log holds the same stream, one JSON object per line.
    lines = layout.run_log.read_text().splitlines()
    assert json.loads(lines[0])["type"] == "run_started" and json.loads(lines[-1])["type"] == "run_finished"
    kinds = {type(e).__name__ for e in events}
    assert {"RunStarted", "BranchAdded", "IterationStatusChanged", "TuningFinished", "NewBest"} <= kinds


def test_branch_spawns_children_up_to_max_depth(mmul_dir: Path) -> None:
    def decide(branch: str, iteration: int) -> dict:
        subs = [{"name": "left", "title": "L", "description": "l"}, {"name": "right", "title": "R", "description": "r"}]
        return {"action": "branch", "reason": "two ways", "sub_strategies": subs}

    scenario = Scenario(strategies=["alpha"], decide=decide)
    # A pool that funds the children's full budgets (1 + 3 + 3): the depth is what is tested here.
    engine = make_engine(mmul_dir, scenario.provider(), max_iter=3, max_depth=2, n_strategies=1, budget_iters=7)
    finished = run(engine)
    assert finished.status == "ok"
    ms = manifests(mmul_dir)
    assert set(ms) == {"b1-alpha", "b1-alpha.1-left", "b1-alpha.2-right"}
    assert ms["b1-alpha"].status == "done" and ms["b1-alpha"].children == ["b1-alpha.1-left", "b1-alpha.2-right"]
    child = ms["b1-alpha.1-left"]
    assert child.parent == "b1-alpha" and child.depth == 1 and child.parent_iteration == 1
    # Two levels: the children cannot branch again, so their "branch" becomes "continue" and they
    # run their full budget.
    assert child.iterations_done == 3 and child.status == "done" and not child.children


def test_max_depth_one_means_no_sub_branches(mmul_dir: Path) -> None:
    def decide(branch: str, iteration: int) -> dict:
        subs = [{"name": "left", "title": "L", "description": "l"}]
        return {"action": "branch", "reason": "split", "sub_strategies": subs}

    scenario = Scenario(strategies=["alpha"], decide=decide)
    run(make_engine(mmul_dir, scenario.provider(), max_iter=2, max_depth=1, n_strategies=1))
    assert set(manifests(mmul_dir)) == {"b1-alpha"}
    # The decide prompt says branching is not available.
    decide_prompt = next(r for r in scenario_requests(scenario) if r.key.node == "decide")
    assert "NOT available here: the depth limit of 1 level(s) is reached" in decide_prompt.messages[-1].content


def test_up_to_four_sub_strategies(mmul_dir: Path) -> None:
    def decide(branch: str, iteration: int) -> dict:
        if branch != "b1-alpha":
            return {"action": "stop", "reason": "leaf"}
        subs = [{"name": f"s{k}", "title": f"S{k}", "description": "x"} for k in range(1, 7)]
        return {"action": "branch", "reason": "many ways", "sub_strategies": subs}

    scenario = Scenario(strategies=["alpha"], decide=decide)
    run(make_engine(mmul_dir, scenario.provider(), max_iter=2, max_depth=2, n_strategies=1, budget_iters=6))
    assert manifests(mmul_dir)["b1-alpha"].children == [f"b1-alpha.{k}-s{k}" for k in range(1, 5)]


def scenario_requests(scenario: Scenario) -> list:
    return scenario.requests


def test_child_starts_from_the_parents_kernel(mmul_dir: Path) -> None:
    seen: list[str] = []

    def decide(branch: str, iteration: int) -> dict:
        if branch == "b1-alpha":
            return {
                "action": "branch",
                "reason": "x",
                "sub_strategies": [{"name": "c", "title": "C", "description": "c"}],
            }
        return {"action": "stop", "reason": "enough"}

    scenario = Scenario(strategies=["alpha"], decide=decide)
    original = scenario.respond

    def spy(request):  # the child's author gets the parent's kernel whole; its plan, the kernel's name
        if request.key.node in ("plan", "author") and request.key.branch == "b1-alpha.1-c":
            seen.append(f"{request.key.node}: " + "\n\n".join(m.content for m in request.messages if m.role == "user"))
        return original(request)

    scenario.respond = spy  # type: ignore[method-assign]
    run(make_engine(mmul_dir, scenario.provider(), max_iter=3, max_depth=2, n_strategies=1))
    plan = next(s for s in seen if s.startswith("plan: "))
    author = next(s for s in seen if s.startswith("author: "))
    assert "the parent branch b1-alpha, iteration 1" in plan and "its kernels: " in plan
    assert "FAKE_TIME_MS: 2.0" in author and "the parent branch b1-alpha, iteration 1" in author


def test_path_budget_limits_root_to_leaf_iterations(mmul_dir: Path) -> None:
    def decide(branch: str, iteration: int) -> dict:
        if branch == "b1-alpha" and iteration == 2:
            return {
                "action": "branch",
                "reason": "x",
                "sub_strategies": [{"name": "c", "title": "C", "description": "c"}],
            }
        return {"action": "continue", "reason": "more"}

    scenario = Scenario(strategies=["alpha"], decide=decide)
    run(make_engine(mmul_dir, scenario.provider(), max_iter=10, max_depth=2, path_budget=5, n_strategies=1))
    ms = manifests(mmul_dir)
    assert ms["b1-alpha"].iterations_done == 2
    child = ms["b1-alpha.1-c"]
    assert child.path_before == 2 and child.iterations_done == 3  # 2 + 3 = the path budget of 5
    assert child.path_budget_total == 5


def test_path_budget_zero_is_off(mmul_dir: Path) -> None:
    scenario = Scenario(strategies=["alpha"])
    run(make_engine(mmul_dir, scenario.provider(), max_iter=3, path_budget=0, n_strategies=1))
    m = manifests(mmul_dir)["b1-alpha"]
    assert m.iterations_done == 3 and m.path_budget_total is None


def test_retries_are_bounded_by_max_iter_only(mmul_dir: Path) -> None:
    scenario = Scenario(strategies=["alpha"], decide=lambda b, i: {"action": "retry", "reason": "flaky"})
    run(make_engine(mmul_dir, scenario.provider(), max_iter=5, n_strategies=1))
    m = manifests(mmul_dir)["b1-alpha"]
    # No fixed cap on retries: four retry decisions, then the budget stops the branch without a call.
    assert m.status == "done" and m.stop_reason == "iteration budget reached (5/5)" and m.iterations_done == 5
    layout = RunLayout(mmul_dir)
    modes = [read_model(layout.branch("b1-alpha").iteration(i).state, IterState).mode for i in range(1, 6)]
    assert modes == ["first", "retry", "retry", "retry", "retry"]
    assert len([c for c in scenario.calls if c[2] == "decide"]) == 4


def test_compile_error_is_fixed_inside_the_step(mmul_dir: Path) -> None:
    def author(branch: str, iteration: int, index: int) -> dict | None:
        if iteration != 1:
            return None
        if index == 0:
            return {
                "tool_calls": [
                    {
                        "id": "a",
                        "name": "write_file",
                        "arguments": {"path": "kernels.cu", "content": kernel_source(1.0, "// FAKE_COMPILE_ERROR\n")},
                    },
                    {"id": "b", "name": "write_file", "arguments": {"path": "tuning.yaml", "content": SPEC}},
                    {"id": "c", "name": "check_compilation", "arguments": {}},
                ]
            }
        if index == 1:
            return {
                "tool_calls": [
                    {
                        "id": "d",
                        "name": "edit_file",
                        "arguments": {"path": "kernels.cu", "old_text": "// FAKE_COMPILE_ERROR\n", "new_text": ""},
                    },
                    {"id": "e", "name": "check_compilation", "arguments": {}},
                ]
            }
        return {"tool_calls": [{"id": "f", "name": "end_step", "arguments": {"summary": "fixed"}}]}

    scenario = Scenario(
        strategies=["alpha"], author_script=author, decide=lambda b, i: {"action": "stop", "reason": "ok"}
    )
    provider = scenario.provider()
    run(make_engine(mmul_dir, provider, n_strategies=1))
    st = read_model(RunLayout(mmul_dir).branch("b1-alpha").iteration(1).state, IterState)
    assert st.author is not None and st.author.ok and st.author.compile_failures == 1 and st.author.compile_checks == 2
    assert st.run is not None and st.run.best_ms == 1.0
    # The model saw the planted error at its line.
    tool_results = [m.content for r in provider.requests for m in r.messages if m.role == "tool"]
    assert any("kernels.cu:2" in t and "planted error" in t for t in tool_results)


def test_authoring_that_never_compiles_fails_the_iteration_not_the_run(mmul_dir: Path) -> None:
    def author(branch: str, iteration: int, index: int) -> dict:
        return {
            "tool_calls": [
                {
                    "id": "a",
                    "name": "write_file",
                    "arguments": {"path": "kernels.cu", "content": kernel_source(1.0, "// FAKE_COMPILE_ERROR\n")},
                },
                {"id": "b", "name": "write_file", "arguments": {"path": "tuning.yaml", "content": SPEC}},
                {"id": "c", "name": "end_step", "arguments": {"summary": "try"}},
            ]
        }

    def decide(branch: str, iteration: int) -> dict:
        return {
            "action": "retry",
            "reason": "it never compiled",
            "error_analysis": {"error_type": "compilation", "root_cause": "a planted error", "suggested_fix": "x"},
        }

    scenario = Scenario(strategies=["alpha"], author_script=author, decide=decide)
    finished = run(make_engine(mmul_dir, scenario.provider(), max_iter=3, n_strategies=1))
    m = manifests(mmul_dir)["b1-alpha"]
    assert m.status == "done" and m.best is None and m.iterations_done == 3
    st1 = read_model(RunLayout(mmul_dir).branch("b1-alpha").iteration(1).state, IterState)
    assert st1.status == "failed" and st1.decision and st1.decision.action == "retry"
    assert st1.decision.error_analysis and st1.decision.error_analysis.error_type == "compilation"
    assert st1.run is None and st1.proposal is None  # the failed iteration went straight to decide
    assert "end_step rejected" in (st1.error or "")
    # The decide prompt saw the failure.
    prompt = next(r for r in scenario.requests if r.key.node == "decide" and r.key.iteration == 1)
    assert "FAILED — authoring failed: end_step rejected" in prompt.messages[-1].content
    assert finished.status == "failed" and (finished.message or "").startswith("no kernel was written")


def test_malformed_tool_arguments_go_back_to_the_model(mmul_dir: Path) -> None:
    def author(branch: str, iteration: int, index: int) -> dict | None:
        if index == 0:
            return {"tool_calls": [{"id": "x", "name": "write_file", "arguments": {}, "error": "not valid JSON"}]}
        if index == 1:
            return {
                "tool_calls": [
                    {
                        "id": "w1",
                        "name": "write_file",
                        "arguments": {"path": "kernels.cu", "content": kernel_source(1.5)},
                    },
                    {"id": "w2", "name": "write_file", "arguments": {"path": "tuning.yaml", "content": SPEC}},
                    {"id": "w3", "name": "read_file", "arguments": {"path": "../../../etc/passwd"}},
                    {"id": "c1", "name": "check_compilation", "arguments": {}},
                ]
            }
        return {"tool_calls": [{"id": "e", "name": "end_step", "arguments": {"summary": "ok"}}]}

    scenario = Scenario(
        strategies=["alpha"], author_script=author, decide=lambda b, i: {"action": "stop", "reason": "x"}
    )
    provider = scenario.provider()
    run(make_engine(mmul_dir, provider, n_strategies=1))
    results = [m for r in provider.requests for m in r.messages if m.role == "tool"]
    assert any(m.is_error and "malformed arguments" in m.content for m in results)
    assert any(m.is_error and "cannot read" in m.content for m in results)
    assert manifests(mmul_dir)["b1-alpha"].best is not None


def test_one_failing_branch_never_cancels_its_siblings(mmul_dir: Path) -> None:
    scenario = Scenario(
        strategies=["alpha", "beta"],
        fail_nodes={("b1-alpha", "plan")},
        decide=lambda b, i: {"action": "stop", "reason": "done"},
    )
    finished = run(make_engine(mmul_dir, scenario.provider(), n_strategies=2))
    ms = manifests(mmul_dir)
    assert ms["b1-alpha"].status == "failed" and "scripted failure" in (ms["b1-alpha"].error or "")
    assert ms["b2-beta"].status == "stopped" and ms["b2-beta"].best is not None
    assert finished.status == "ok"


def test_master_failure_ends_the_run_with_one_message(mmul_dir: Path) -> None:
    scenario = Scenario(fail_nodes={(None, "analyze")})
    finished = run(make_engine(mmul_dir, scenario.provider()))
    assert finished.status == "failed" and "scripted failure in analyze" in (finished.message or "")
    assert RunLayout(mmul_dir).final_results.exists()


def test_kill_pause_and_max_iter_through_the_control_surface(mmul_dir: Path) -> None:
    scenario = Scenario(strategies=["alpha", "beta", "gamma"])
    bus = EventBus()
    engine = make_engine(
        mmul_dir, scenario.provider(), bus=bus, max_iter=4, n_strategies=3, tuner=FakeTuner(delay_s=0.05),
        budget_iters=6,  # what beta (2) and gamma (4) run: no iteration is left for the pool to move
    )  # fmt: skip
    layout = RunLayout(mmul_dir)
    done: list[str] = []

    def on_event(event) -> None:
        if isinstance(event, BranchAdded) and event.branch == "b1-alpha":
            engine.kill_branch("b1-alpha")
        if isinstance(event, BranchAdded) and event.branch == "b2-beta":
            engine.change_max_iter("b2-beta", -2)  # 4 -> 2
        if isinstance(event, BranchAdded) and event.branch == "b3-gamma":
            engine.pause_branch("b3-gamma")
            asyncio.get_running_loop().call_later(0.3, engine.resume_branch, "b3-gamma")
        if isinstance(event, DecisionMade):
            done.append(event.branch)

    bus.subscribe(on_event)
    run(engine)
    ms = manifests(mmul_dir)
    assert ms["b1-alpha"].status == "killed" and ms["b1-alpha"].iterations_done == 0
    assert ms["b2-beta"].iterations_done == 2 and ms["b2-beta"].status == "done"
    assert ms["b3-gamma"].iterations_done == 4
    assert read_model(layout.branch("b1-alpha").config, BranchConfig).killed
    assert "b1-alpha" not in done


def test_kill_cancels_a_step_in_flight(mmul_dir: Path) -> None:
    scenario = Scenario(strategies=["alpha"])
    bus = EventBus()
    engine = make_engine(mmul_dir, scenario.provider(), bus=bus, n_strategies=1, tuner=FakeTuner(delay_s=30))

    def on_event(event) -> None:
        if getattr(event, "type", "") == "iteration_status" and event.status == "running":
            asyncio.get_running_loop().call_later(0.1, engine.kill_branch, "b1-alpha")

    bus.subscribe(on_event)
    finished = asyncio.run(asyncio.wait_for(engine.run(), 10))
    assert manifests(mmul_dir)["b1-alpha"].status == "killed"
    assert finished.status == "failed" and finished.message == "every branch was killed by the user"


def test_retry_reopens_a_finished_branch(mmul_dir: Path) -> None:
    scenario = Scenario(strategies=["alpha"], decide=lambda b, i: {"action": "stop", "reason": "enough"})
    bus = EventBus()
    engine = make_engine(mmul_dir, scenario.provider(), bus=bus, max_iter=5, n_strategies=1)
    retried: list[bool] = []

    def on_event(event) -> None:
        if getattr(event, "type", "") == "branch_status" and event.status == "stopped" and not retried:
            retried.append(True)
            engine.retry_branch("b1-alpha")

    bus.subscribe(on_event)
    run(engine)
    m = manifests(mmul_dir)["b1-alpha"]
    assert m.iterations_done == 2 and m.status == "stopped"


def test_new_best_events_rank_by_time(mmul_dir: Path) -> None:
    times = {1: 3.0, 2: 1.0, 3: 2.0}
    scenario = Scenario(strategies=["alpha"], time_ms=lambda b, i: times[i])
    bus = EventBus()
    bests: list[NewBest] = []
    bus.subscribe(lambda e: bests.append(e) if isinstance(e, NewBest) else None)
    run(make_engine(mmul_dir, scenario.provider(), bus=bus, max_iter=3, n_strategies=1))
    assert [b.time_ms for b in bests] == [3.0, 1.0]
    assert manifests(mmul_dir)["b1-alpha"].best.iteration == 2  # type: ignore[union-attr]


class RecordingTuner(FakeTuner):
    """The FAKE tuner, noting which device each tuning ran on and when."""

    def __init__(self) -> None:
        super().__init__(delay_s=0.2)
        self.spans: list[tuple[int, float, float]] = []

    async def tune(self, request, on_progress):  # type: ignore[no-untyped-def]
        start = asyncio.get_running_loop().time()
        summary = await super().tune(request, on_progress)
        self.spans.append((request.device, start, asyncio.get_running_loop().time()))
        return summary


def test_gpu_steps_are_serialised_per_device_and_spread_over_devices(mmul_dir: Path) -> None:
    from cacao_tui.engine.scheduler import GpuScheduler

    scenario = Scenario(strategies=["a", "b", "c", "d"], decide=lambda b, i: {"action": "stop", "reason": "x"})
    tuner = RecordingTuner()
    engine = make_engine(mmul_dir, scenario.provider(), tuner=tuner, n_strategies=4)
    engine.deps.devices = GpuScheduler([0, 1])
    run(engine)
    assert {d for d, _, _ in tuner.spans} == {0, 1}
    for device in (0, 1):
        spans = sorted((s, e) for d, s, e in tuner.spans if d == device)
        assert all(a_end <= b_start + 1e-6 for (_, a_end), (b_start, _) in itertools.pairwise(spans))
    # Two devices: some tuning ran at the same time on different GPUs.
    overlap = any(s0 < e1 and s1 < e0 for d0, s0, e0 in tuner.spans for d1, s1, e1 in tuner.spans if d0 != d1)
    assert overlap


def test_single_shot_path(mmul_dir: Path) -> None:
    scenario = Scenario(strategies=["alpha"], decide=lambda b, i: {"action": "stop", "reason": "x"})
    original = scenario.respond

    def respond(request):  # type: ignore[no-untyped-def]
        node = request.key.node
        if node == "implement":
            return "Here it is:\n```cuda\n" + kernel_source(0.75) + "```\n"
        if node == "configure":
            return "```yaml\n" + SPEC + "```"
        return original(request)

    scenario.respond = respond  # type: ignore[method-assign]
    provider = scenario.provider()
    run(make_engine(mmul_dir, provider, n_strategies=1, single_shot=True))
    nodes = {r.key.node for r in provider.requests}
    assert {"implement", "configure"} <= nodes and "author" not in nodes
    assert manifests(mmul_dir)["b1-alpha"].best.time_ms == 0.75  # type: ignore[union-attr]


def test_without_a_timed_best_the_next_iteration_starts_from_the_latest_kernel(mmul_dir: Path) -> None:
    """In a dry run nothing is timed: iteration 2 must still build on iteration 1's kernel."""
    from cacao_tui.store.state import TuneOutcome

    class DryTuner(FakeTuner):  # FAKE: answers like a dry run, nothing timed
        async def tune(self, request, on_progress):  # type: ignore[no-untyped-def]
            raise AssertionError("a dry run never tunes")

    scenario = Scenario(strategies=["alpha"])
    plans: list[str] = []
    original = scenario.respond

    def spy(request):  # type: ignore[no-untyped-def]
        if request.key.node == "plan":
            plans.append(request.messages[-1].content)
        return original(request)

    scenario.respond = spy  # type: ignore[method-assign]
    authors: list[str] = []
    inner = scenario.respond

    def spy_author(request):  # type: ignore[no-untyped-def]
        if request.key.node == "author" and request.key.index == 0:
            authors.append("\n\n".join(m.content for m in request.messages))
        return inner(request)

    scenario.respond = spy_author  # type: ignore[method-assign]
    engine = make_engine(mmul_dir, scenario.provider(), tuner=DryTuner(), max_iter=2, n_strategies=1, dry_run=True)
    run(engine)
    assert "the first one is written from the reference" in plans[0] and len(plans) == 1
    assert "Current files, from iteration 1 of this branch" in authors[1] and "FAKE_TIME_MS: 2.0" in authors[1]
    st = read_model(RunLayout(mmul_dir).branch("b1-alpha").iteration(2).state, IterState)
    assert isinstance(st.run, TuneOutcome) and not st.run.ran


def test_ktt_command_lines(monkeypatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """What KttTuner asks of ktt; with several GPUs the compiler pools share the cores."""
    from cacao_tui import ktt_client
    from cacao_tui.ktt_client import KttTuner, TuneRequest
    from cacao_tui.nodes.run import compile_workers
    from cacao_tui.subprocesses import ProcessResult

    seen: list[list[str]] = []

    async def fake_run(argv, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(argv)
        return ProcessResult(returncode=0, stdout_lines=[], stderr="", timed_out=False, seconds=0.0)

    monkeypatch.setattr(ktt_client, "run_streaming", fake_run)
    req = TuneRequest(
        problem_dir=tmp_path,
        kernel=tmp_path / "k.cu",
        spec=tmp_path / "t.yaml",
        out_dir=tmp_path,
        device=1,
        duration_s=6,
        watchdog_s=60,
        reference_time=tmp_path / "r.json",
        compile_workers=7,
    )
    with contextlib.suppress(ktt_client.TunerError):  # the fake process printed no result
        asyncio.run(KttTuner(python="py").tune(req, lambda p: None))
    argv = seen[0]
    assert argv[:4] == ["py", "-m", "ktt", "tune"] and argv[-1] == "--json"
    assert argv[argv.index("--device") + 1] == "1" and argv[argv.index("--duration") + 1] == "6"
    assert argv[argv.index("--compile-workers") + 1] == "7"
    assert compile_workers(1) is None and compile_workers(2) >= 1


def _branch_once(branch: str, iteration: int) -> dict:
    if branch == "b1-alpha" and iteration == 1:
        return {"action": "branch", "reason": "x", "sub_strategies": [{"name": "c", "title": "C", "description": "c"}]}
    return {"action": "continue", "reason": "more"}


def test_children_inherit_the_parents_raised_max_iter(mmul_dir: Path) -> None:
    scenario = Scenario(strategies=["alpha"], decide=_branch_once)
    bus = EventBus()
    engine = make_engine(
        mmul_dir, scenario.provider(), bus=bus, max_iter=3, max_depth=2, n_strategies=1, budget_iters=8
    )
    raised: list[int] = []
    bus.subscribe(
        lambda e: raised.append(engine.change_max_iter("b1-alpha", 4))
        if isinstance(e, BranchAdded) and e.branch == "b1-alpha" and not raised
        else None
    )
    run(engine)
    assert raised == [7]
    layout = RunLayout(mmul_dir)
    assert read_model(layout.branch("b1-alpha.1-c").config, BranchConfig).max_iter == 7
    assert manifests(mmul_dir)["b1-alpha.1-c"].iterations_done == 7


def test_a_grant_extends_the_path_budget_of_the_children(mmul_dir: Path) -> None:
    scenario = Scenario(strategies=["alpha"], decide=_branch_once)
    bus = EventBus()
    engine = make_engine(mmul_dir, scenario.provider(), bus=bus, max_iter=3, max_depth=2, path_budget=6, n_strategies=1)
    raised: list[int] = []
    bus.subscribe(  # the root's share is the path budget (6); the user grants 2 more
        lambda e: raised.append(engine.change_max_iter("b1-alpha", 2))
        if isinstance(e, BranchAdded) and e.branch == "b1-alpha" and not raised
        else None
    )
    run(engine)
    child = manifests(mmul_dir)["b1-alpha.1-c"]
    # The path is 6 + 2 = 8 iterations; the parent used 1, so the child gets 7.
    assert raised == [8] and child.path_budget_total == 8 and child.path_before == 1
    assert read_model(RunLayout(mmul_dir).branch("b1-alpha.1-c").config, BranchConfig).max_iter == 7
