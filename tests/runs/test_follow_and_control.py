"""Following a run's log from another process, and steering it through its files."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import pytest

from cacao_tui.engine import events as ev
from cacao_tui.engine.control import SteeringError
from cacao_tui.runs.follow import RunLogFollower
from cacao_tui.runs.problem_trash import TrashError, move_to_trash
from cacao_tui.runs.providers import provider_statuses, run_environment
from cacao_tui.runs.remote_control import NOT_LIVE, RemoteControl
from cacao_tui.store.atomic import write_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import BranchConfig, BranchManifest, Strategy
from tests.runs.run_files import copy_problem, hold_note, start_holder, started, write_log


def test_follower_reads_appended_events_and_skips_junk(tmp_path: Path) -> None:
    log = tmp_path / "output" / "run.jsonl"
    follower = RunLogFollower(log)
    assert follower.poll() == []  # no log yet
    write_log(tmp_path, [started()])
    with log.open("a") as f:
        f.write("not json\n")
        f.write('{"type":"log","message":"half')  # a line being written
    events = follower.poll()
    assert [type(e) for e in events] == [ev.RunStarted] and follower.skipped == 1
    with log.open("a") as f:
        f.write(' a line"}\n')
    (line,) = follower.poll()
    assert isinstance(line, ev.LogLine) and line.message == "half a line"


def test_follower_notices_a_replaced_log(tmp_path: Path) -> None:
    write_log(tmp_path, [started()])
    follower = RunLogFollower(tmp_path / "output" / "run.jsonl")
    assert len(follower.poll()) == 1
    os.rename(tmp_path / "output", tmp_path / "archived")  # a new run archived output/
    write_log(tmp_path, [started(), ev.MasterPhase(phase="analyzing")])
    assert follower.poll() == [] and follower.replaced


def test_follower_reads_a_backlog_in_bounded_steps(tmp_path: Path) -> None:
    write_log(tmp_path, [started()] + [ev.LogLine(message=f"line {i}") for i in range(2000)])
    follower = RunLogFollower(tmp_path / "output" / "run.jsonl", read_bytes=16 * 1024)
    first = follower.poll()
    assert 0 < len(first) < 2001
    total = len(first)
    while batch := follower.poll():
        total += len(batch)
    assert total == 2001 and follower.skipped == 0


def _branch(problem: Path, name: str = "b1", status: str = "running") -> RunLayout:
    layout = RunLayout(problem)
    branch = layout.branch(name)
    branch.root.mkdir(parents=True)
    strategy = Strategy(name=name, title="t", description="d")
    write_model(branch.manifest, BranchManifest(name=name, title="t", strategy=strategy, status=status))
    return layout


def test_remote_control_writes_the_files_the_workers_read(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    layout = _branch(problem)
    lines: list[tuple[str, str | None]] = []
    control = RemoteControl(problem, 3, on_log=lambda line, b: lines.append((line, b)))
    control.pause_branch("b1")
    cfg = BranchConfig.model_validate_json(layout.branch("b1").config.read_text())
    assert cfg.paused and cfg.max_iter == 3
    assert control.change_max_iter("b1", 1) == 4
    control.kill_branch("b1")
    assert BranchConfig.model_validate_json(layout.branch("b1").config.read_text()).killed
    line = control.send_message("b1", "try 8 rows per thread")
    (queued,) = (layout.branch("b1").root / "inbox").iterdir()
    command = json.loads(queued.read_text())
    assert command["kind"] == "message" and command["text"] == "try 8 rows per thread" and command["source"] == "app"
    assert line.endswith(NOT_LIVE)  # no run holds the directory: the next --resume applies it
    with pytest.raises(SteeringError, match="no branch named 'nope'"):
        control.pause_branch("nope")
    assert not (layout.branches / "nope").exists()
    assert any("pause requested" in text and b == "b1" for text, b in lines)


def test_remote_retry_of_a_finished_branch_queues_a_retry_decision(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    layout = _branch(problem, status="failed")
    RemoteControl(problem, 3).retry_branch("b1")
    (queued,) = (layout.branch("b1").root / "inbox").iterdir()
    assert json.loads(queued.read_text())["action"] == "retry"


def test_stop_sends_sigterm_to_the_holder_only(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    holder = start_holder(problem)
    try:
        control = RemoteControl(problem, 3)
        assert control.is_running() and control.holder_pid() == holder.pid
        asyncio.run(control.stop())
        assert holder.wait(timeout=10) == -signal.SIGTERM and control.signalled == holder.pid
        assert not control.is_running()
        asyncio.run(control.stop())  # nothing live: nothing signalled
    finally:
        if holder.poll() is None:
            holder.kill()


def test_stop_refuses_a_run_on_another_host(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    hold_note(problem, os.getpid(), host="elsewhere")
    with pytest.raises(SteeringError, match="elsewhere"):
        asyncio.run(RemoteControl(problem, 3).stop())


def test_delete_moves_the_problem_to_the_trash(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    write_log(problem, [started()])
    target = move_to_trash(problem)
    assert not problem.exists() and target.parent == tmp_path / ".trash"
    assert (target / "problem.yaml").is_file() and (target / "output" / "run.jsonl").is_file()
    again = copy_problem(tmp_path)
    holder = start_holder(again)
    try:
        with pytest.raises(TrashError, match="a run is using it"):
            move_to_trash(again)
    finally:
        holder.kill()
        holder.wait()
    assert again.is_dir()


def test_provider_statuses_name_the_variable_never_the_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for var in ("ANTHROPIC_API_KEY", "CLAUDE_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "LLM_PROVIDER"):
        monkeypatch.delenv(var, raising=False)
    problem = copy_problem(tmp_path)
    (problem / ".env").write_text("ANTHROPIC_API_KEY=sk-ant-secret-value-123\n")
    before = dict(os.environ)
    statuses = {s.name: s for s in provider_statuses(run_environment(problem))}
    assert dict(os.environ) == before  # the problem's .env did not leak into the app's environment
    assert statuses["anthropic"].ready and statuses["anthropic"].note == "key set (ANTHROPIC_API_KEY)"
    assert not statuses["openai"].ready and "needs OPENAI_API_KEY" in statuses["openai"].note
    assert statuses["replay"].ready and statuses["replay"].note == "no key needed"
    assert all("secret" not in s.note for s in statuses.values())


def test_log_poll_time_is_bounded(tmp_path: Path) -> None:
    write_log(tmp_path, [started()] + [ev.LogLine(message="x" * 200) for i in range(20_000)])
    follower = RunLogFollower(tmp_path / "output" / "run.jsonl")
    t0 = time.perf_counter()
    follower.poll()
    assert follower.offset <= 4 * 1024 * 1024
    assert time.perf_counter() - t0 < 10
