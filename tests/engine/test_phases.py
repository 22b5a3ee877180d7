"""Split runs (--phase, store/phases.py): the model's steps in one process, the GPU's in another.

The mmul replay session with the FAKE tuner: alternating phases reach the final_results.json of
one plain run; a phase takes only its own steps and, run twice, does nothing the second time;
a SIGKILL in either phase resumes; output/ copied to another directory between phases goes on
there, with no absolute path in its state files.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cacao_tui.llm import ProviderChoice
from cacao_tui.llm.factory import build_provider
from cacao_tui.llm.no_model import NoModel
from cacao_tui.nodes.context import NoDevices
from cacao_tui.store.atomic import read_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.phases import PhaseState, read_phase_state
from cacao_tui.store.results import load_results, render_results
from cacao_tui.store.state import FinalResults
from tests.engine.conftest import ROOT, make_engine
from tests.engine.prompt_records import opening
from tests.fake_tuner import FakeTuner

SETTINGS = {"max_iter": 5, "max_depth": 2, "n_strategies": 4}
MAX_PHASES = 40


def _engine(problem: Path, phase: str | None, resumed: bool, tuner: FakeTuner | None = None, **settings: object):
    if phase == "gpu":  # as launch.py builds it: a provider that makes no call
        provider: object = NoModel("replay", "replay")
    else:
        choice = ProviderChoice(provider="replay", model="replay", source="test")
        provider = build_provider(choice, replay_from=problem / "session.jsonl")
    engine = make_engine(problem, provider, resumed=resumed, tuner=tuner, **(settings or SETTINGS))  # type: ignore[arg-type]
    engine.deps.phase = phase  # type: ignore[assignment]
    if phase == "llm":
        engine.deps.devices = NoDevices()
    return engine


def run_phase(
    problem: Path, phase: str | None, resumed: bool = True, tuner: FakeTuner | None = None, **settings: object
):
    return asyncio.run(_engine(problem, phase, resumed, tuner, **settings).run())


def alternate(problem: Path, first: str = "llm", resumed: bool = False) -> list[str]:
    """Phases until the run ends; the phases it took."""
    phase, taken = first, []
    for _ in range(MAX_PHASES):
        finished = run_phase(problem, phase, resumed)
        taken.append(phase)
        if finished.status != "waiting":
            assert finished.status == "ok", finished
            return taken
        state = read_phase_state(RunLayout(problem))
        assert state is not None and state.next_phase is not None
        phase, resumed = state.next_phase, True
    raise AssertionError(f"no end after {MAX_PHASES} phases: {taken}")


def results(problem: Path) -> dict:
    """final_results.json without what differs between two runs of the same session."""
    data = json.loads(RunLayout(problem).final_results.read_text())
    data.pop("finished_at", None)
    if data.get("cost_usd") is not None:  # a sum of the same costs in another order
        data["cost_usd"] = round(data["cost_usd"], 9)
    for b in data.get("all_branches") or []:
        b.pop("path", None)  # the original's key: the directory it was written in
    return data


def copy_problem(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("archive"))
    return target


@pytest.fixture
def plain(mmul_dir: Path, tmp_path: Path) -> dict:
    """The final results of one plain run of the session (the reference)."""
    problem = copy_problem(mmul_dir, tmp_path / "plain" / "mmul")
    assert run_phase(problem, None, resumed=False).status == "ok"
    return results(problem)


def test_alternating_phases_give_the_plain_runs_final_results(mmul_dir: Path, plain: dict) -> None:
    taken = alternate(mmul_dir)
    assert taken[0] == "llm" and "gpu" in taken and taken[-1] == "llm"
    assert all(a != b for a, b in itertools.pairwise(taken))  # each phase hands over to the other
    assert results(mmul_dir) == plain
    final = read_model(RunLayout(mmul_dir).final_results, FinalResults)
    assert final.complete and final.best is not None
    assert read_phase_state(RunLayout(mmul_dir)).next_phase is None  # nothing waits any more


def test_a_phase_takes_only_its_steps_and_run_twice_does_nothing(mmul_dir: Path) -> None:
    layout = RunLayout(mmul_dir)
    model = FakeTuner()
    first = run_phase(mmul_dir, "llm", resumed=False, tuner=model)
    assert first.status == "waiting" and first.waiting and set(first.waiting.values()) == {"gpu"}
    assert "tune" not in model.calls and "profile" not in model.calls  # compile checks only
    assert "wait for the GPU; continue with: cacao --dir" in (first.message or "")
    assert "--resume --phase gpu" in (first.message or "")
    state = read_phase_state(layout)
    assert state is not None and state.phase == "llm" and state.next_phase == "gpu"
    author = json.loads((layout.branch("b1-tiling").iteration(1).llm / "author_000.json").read_text())
    assert "validate" not in {t["name"] for t in author["tools"]}  # no GPU in the model's phase
    assert "There is no validate tool in this step" in opening(author)  # and the prompt says why

    def snapshot() -> dict[str, bytes]:
        files = [*layout.branches.rglob("*.json"), layout.master, layout.pool]
        return {str(p): p.read_bytes() for p in files if "llm" not in p.parts or p.suffix == ".json"}

    before = snapshot()
    again = run_phase(mmul_dir, "llm", tuner=model)  # nothing left for the model: nothing changes
    assert again.status == "waiting" and again.waiting == first.waiting and snapshot() == before

    gpu = FakeTuner()
    done = run_phase(mmul_dir, "gpu", tuner=gpu)  # NoModel: a model call would fail its branch
    assert done.status == "waiting" and set(done.waiting.values()) == {"llm"}
    assert gpu.calls.count("tune") == len(first.waiting) and gpu.calls.count("profile") == len(first.waiting)
    assert "--resume --phase llm" in (done.message or "")
    for name in done.waiting:
        m = json.loads(layout.branch(name).manifest.read_text())
        assert m["status"] == "running" and not m.get("error")
    before = snapshot()
    gpu_again = FakeTuner()
    assert run_phase(mmul_dir, "gpu", tuner=gpu_again).waiting == done.waiting
    # the FAKE tuner describes no device, so each GPU phase asks again; nothing is tuned or profiled
    assert set(gpu_again.calls) <= {"device"} and snapshot() == before

    loaded = load_results(layout)  # --best says what waits and what to run next
    text = render_results(loaded, layout)
    assert "waits for the model" in text and "continue with: cacao --dir" in text and "--phase llm" in text


def test_the_gpu_phase_before_the_master_has_strategies_waits_for_the_model(mmul_dir: Path) -> None:
    RunLayout(mmul_dir).output.mkdir()
    finished = run_phase(mmul_dir, "gpu", resumed=True)
    assert finished.status == "waiting" and "the master waits for the model" in (finished.message or "")
    assert read_phase_state(RunLayout(mmul_dir)) == PhaseState(
        phase="gpu", ended_at=read_phase_state(RunLayout(mmul_dir)).ended_at, master="llm"
    )


def test_phases_go_on_in_a_copy_of_the_directory_with_no_absolute_path_in_the_state(
    mmul_dir: Path, tmp_path: Path, plain: dict
) -> None:
    where = mmul_dir
    phase, resumed = "llm", False
    for k in range(MAX_PHASES):
        finished = run_phase(where, phase, resumed)
        if finished.status != "waiting":
            break
        moved = copy_problem(where, tmp_path / f"machine{k}" / "mmul")  # tar/rsync to the other machine
        shutil.rmtree(where)  # nothing may still point at the old place
        where, resumed = moved, True
        phase = read_phase_state(RunLayout(where)).next_phase
    assert finished.status == "ok" and results(where) == plain
    output = RunLayout(where).output
    state_files = [output / n for n in ("context.json", "master.json", "pool.json", "phase.json", "device.json")]
    state_files += [p for p in (output / "branches").rglob("*.json") if "tune" not in p.parts]
    for path in state_files:
        if path.exists():
            text = path.read_text()
            assert str(tmp_path) not in text, f"{path} holds an absolute path"


def _harness(problem: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "tests.engine.harness", str(problem), "--max-iter", "5", "--strategies", "4", *args]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)


@pytest.mark.parametrize(
    ("killed_phase", "kill_when"),
    [("llm", "b2-strip:1:implementing"), ("gpu", "b1-tiling:1:profiling")],
)
def test_sigkill_in_a_phase_then_resume(mmul_dir: Path, plain: dict, killed_phase: str, kill_when: str) -> None:
    if killed_phase == "gpu":
        first = _harness(mmul_dir, "--phase", "llm")
        assert first.returncode == 0 and "FINISHED waiting" in first.stdout, first.stdout[-2000:] + first.stderr
    resume = ["--resume"] if killed_phase == "gpu" else []
    killed = _harness(mmul_dir, *resume, "--phase", killed_phase, "--kill-when", kill_when)
    assert killed.returncode == -9, killed.stdout[-2000:] + killed.stderr[-2000:]
    again = _harness(mmul_dir, "--resume", "--phase", killed_phase)
    assert again.returncode == 0 and "FINISHED waiting" in again.stdout, again.stdout[-2000:] + again.stderr
    state = read_phase_state(RunLayout(mmul_dir))
    assert state is not None and state.next_phase is not None
    alternate(mmul_dir, first=state.next_phase, resumed=True)
    got, want = results(mmul_dir), dict(plain)
    # The killed step's calls were made and are counted; its redo counts again (the replay's
    # recorded usage): the totals may only grow, everything else is the plain run's.
    spent, plain_spent = got.pop("tokens"), want.pop("tokens")
    got.pop("cost_usd"), want.pop("cost_usd")
    assert all(spent[k] >= plain_spent[k] for k in plain_spent), (spent, plain_spent)
    assert got == want


def test_the_views_say_what_waits_and_the_home_screen_offers_the_next_phase(mmul_dir: Path) -> None:
    from cacao_tui.engine.events import parse_event
    from cacao_tui.runs.catalog import describe_problem
    from cacao_tui.runs.last_settings import options_like_last_run
    from cacao_tui.ui.home.rows import describe
    from cacao_tui.ui.run_view import RunView

    finished = run_phase(mmul_dir, "llm", resumed=False)
    view = RunView()  # the app's picture of the run, folded from the run log
    for line in RunLayout(mmul_dir).run_log.read_text().splitlines():
        view.apply(parse_event(line))
    assert {view.branches[n].status for n in finished.waiting} == {"waits for the GPU"}
    entry = describe_problem(mmul_dir)  # the home screen's row and panel
    assert entry.last.status == "waiting" and "--resume --phase gpu" in (entry.last.message or "")
    panel = describe(entry, width=200).plain
    assert "R runs the phase it waits for" in panel and "wait for the GPU; continue with" in panel
    options = options_like_last_run(mmul_dir, resume=True)  # what R presets in the run dialog
    assert options.phase == "gpu" and options.flags()[-3:] == ["--resume", "--phase", "gpu"]


def test_steering_between_phases_is_applied_by_the_next_phase(mmul_dir: Path) -> None:
    from cacao_tui.engine.control import queue_decision, queue_message

    layout = RunLayout(mmul_dir)
    assert run_phase(mmul_dir, "llm", resumed=False).status == "waiting"
    message = "Look at the long strips: TM = 16 only."
    queue_message(layout, "b2-strip", message, source="cli")  # as `cacao --branch b2-strip --message` does
    queue_decision(layout, "b2-strip", "continue", default_max_iter=SETTINGS["max_iter"], source="cli")
    assert run_phase(mmul_dir, "gpu").status == "waiting"
    strip = json.loads(layout.branch("b2-strip").manifest.read_text())
    assert [m["text"] for m in strip["messages"]] == [message] and strip["pending_decision"]["action"] == "continue"
    alternate(mmul_dir, first="llm", resumed=True)
    strip = json.loads(layout.branch("b2-strip").manifest.read_text())
    assert strip["pending_decision"] is None and len(strip["applied"]) == 2
    d1 = json.loads(layout.branch("b2-strip").iteration(1).state.read_text())["decision"]
    assert d1["action"] == "continue" and d1["overridden_from"] == "stop"
    plan = json.loads((layout.branch("b2-strip").iteration(2).llm / "plan_000.json").read_text())
    assert message in opening(plan)  # planned again with the message, in a later model phase
