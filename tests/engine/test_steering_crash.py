"""Steering through the command line, then SIGKILL at many points of the run that applies it,
then --resume: a message is recorded once and reaches the next prompts, the revert continues
from iteration 2 with the later iterations kept (superseded), the changed decision reopens
the branch, the delete moves the branch to the trash — each exactly once. The replay session
of problems/mmul answers the steered branches (its "used only when steered" calls); the
tuner is the FAKE one (tests/engine/harness.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cacao_tui.engine.control import update_branch_config
from cacao_tui.store.atomic import read_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import BranchManifest, IterState
from tests.engine.conftest import ROOT
from tests.engine.prompt_records import opening

MESSAGE = "Look at the long strips: TM = 16 only."



def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT))


def harness(problem: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.engine.harness", str(problem), *extra],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_env(),
        timeout=240,
    )


def cacao(problem: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cacao_tui", "--dir", str(problem), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_env(),
        timeout=60,
    )


def manifest(layout: RunLayout, name: str) -> BranchManifest:
    return read_model(layout.branch(name).manifest, BranchManifest)


def state(layout: RunLayout, name: str, i: int) -> IterState:
    return read_model(layout.branch(name).iteration(i).state, IterState)


def test_cli_steering_refusals_are_one_line_and_write_nothing(mmul_dir: Path) -> None:
    nothing = cacao(mmul_dir, "--branch", "b1-tiling", "--message", "hi")
    assert nothing.returncode == 2 and "no run to steer here" in nothing.stderr
    assert harness(mmul_dir).returncode == 0
    cases = [
        (["--branch", "nope", "--delete"], "no branch named 'nope' (branches: b1-tiling, "),
        (["--branch", "b1-tiling/../b2-strip", "--delete"], "no branch named 'b1-tiling/../b2-strip'"),
        (["--branch", "b1-tiling", "--revert", "9"], "iteration 9 has no decided kernel"),
        (["--branch", "b1-tiling", "--revert", "0"], "iterations are numbered from 1"),
        (["--branch", "b1-tiling", "--decision", "jump"], "unknown decision 'jump'"),
        (["--branch", "b2-strip", "--decision", "branch"], "named no sub-strategies"),
        (["--branch", "b1-tiling"], "--branch needs what to do"),
        (["--message", "hi"], "--message steers a branch: add --branch NAME"),
        (["--branch", "b1-tiling", "--delete", "--message", "x"], "not allowed with argument"),
        (["--branch", "b1-tiling", "--delete", "--resume"], "only queues a command"),
        (["--branch", "b1-tiling", "--delete", "--check"], "does not go with --check"),
    ]
    for args, needle in cases:
        done = cacao(mmul_dir, *args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert needle in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr
    assert not list((mmul_dir / "output" / "branches").glob("*/inbox"))


@pytest.mark.parametrize("kill_after", [4, 15, 30, 55, 90])
def test_steering_between_runs_survives_sigkill_and_resume(mmul_dir: Path, kill_after: int) -> None:
    layout = RunLayout(mmul_dir)
    assert "FINISHED ok" in harness(mmul_dir).stdout
    assert manifest(layout, "b1-tiling").status == "done" and manifest(layout, "b2-strip").status == "stopped"

    for args in (
        ["--branch", "b2-strip", "--message", MESSAGE],
        ["--branch", "b2-strip", "--decision", "continue"],
        ["--branch", "b1-tiling", "--revert", "2"],
    ):
        done = cacao(mmul_dir, *args)
        assert done.returncode == 0, done.stderr
        assert "queued" in done.stdout and "--resume" in done.stdout
    # No run is live: a delete is done at once (queued, only a --resume would ever carry it out).
    deleted = cacao(mmul_dir, "--branch", "b3-quad", "--delete")
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.startswith("b3-quad: deleted (no run is live): b3-quad moved to")
    assert "b3-quad" not in layout.branch_names() and (layout.output / "trash" / "b3-quad").is_dir()
    final = json.loads(layout.final_results.read_text())
    assert "b3-quad" not in [b["name"] for b in final["branches"]] and final["complete"]
    commands = [json.loads(p.read_text()) for p in (layout.output / "branches").glob("*/inbox/*.json")]
    assert sorted(c["kind"] for c in commands) == ["decision", "message", "revert"]

    killed = harness(mmul_dir, "--resume", "--kill-after", str(kill_after))
    assert killed.returncode in (-9, 0), killed.stderr[-2000:]
    for path in layout.output.rglob("*.json"):
        json.loads(path.read_text())  # nothing torn
    done = harness(mmul_dir, "--resume")
    assert done.returncode == 0 and "FINISHED ok" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]

    # delete: moved, not recreated, nothing lost
    assert "b3-quad" not in layout.branch_names()
    assert (layout.output / "trash" / "b3-quad" / "iter2" / "state.json").exists()
    # revert: iterations 3 and 4 kept but superseded; iteration 5 continued from iteration 2's kernel
    tiling = manifest(layout, "b1-tiling")
    assert tiling.superseded == [3, 4] and tiling.status == "stopped"
    assert state(layout, "b1-tiling", 3).decision is not None
    st5 = state(layout, "b1-tiling", 5)
    assert st5.base_iteration == 2 and st5.decision is not None and st5.plan
    author5 = json.loads((layout.branch("b1-tiling").iteration(5).llm / "author_000.json").read_text())
    assert "Current files, from iteration 2 of this branch (the iteration the user reverted to)" in opening(author5)
    assert tiling.children == ["b1-tiling.1-vec-dbuf", "b1-tiling.2-vec-smem"]  # its sub-branches stay
    # message and decision: the strip branch continued, planned again with the message, once
    strip = manifest(layout, "b2-strip")
    assert [m.text for m in strip.messages] == [MESSAGE]
    d1 = state(layout, "b2-strip", 1).decision
    assert d1 is not None and d1.action == "continue" and d1.overridden_from == "stop"
    st2 = state(layout, "b2-strip", 2)
    assert (
        st2.decision is not None
        and st2.plan
        and MESSAGE in opening(json.loads((layout.branch("b2-strip").iteration(2).llm / "plan_000.json").read_text()))
    )
    # every command applied exactly once (the delete's went to the trash with its branch)
    applied = [c for name in ("b1-tiling", "b2-strip") for c in manifest(layout, name).applied]
    assert sorted(applied) == sorted(c["id"] for c in commands)


def test_live_cli_steering_then_sigkill_then_resume(mmul_dir: Path) -> None:
    """The real command on the replay (--dry-run: NVRTC compile checks), steered from another
    process while it runs, SIGKILLed while it acts on the commands, then --resume.

    The run must still be live when the CLI's commands land, however slowly their four processes
    start on a loaded machine: one of the tiling branch's sub-branches is paused through its
    control file (written, as the app writes it, before the branch exists: the engine keeps a
    branch_config.json it finds), so the run cannot finish until the test lets it go."""
    import signal
    import time

    layout = RunLayout(mmul_dir)
    holder = layout.branch("b1-tiling.1-vec-dbuf")
    argv = [sys.executable, "-m", "cacao_tui", "--dir", str(mmul_dir), "--provider", "replay", "--no-ui", "--dry-run"]
    proc = subprocess.Popen(
        argv, cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    assert proc.stdout is not None
    seen: list[str] = []
    deadline = time.time() + 300
    steered = False
    held = False
    for line in proc.stdout:
        seen.append(line)
        if not held and line.startswith("cacao: starting"):  # output/ is the run's now (nothing to archive)
            update_branch_config(holder, 5, paused=True)
            held = True
        if not steered and "b1-tiling: done" in line:  # the tiling branch has branched; its children run
            steered = True
            # Every branch paused first, as the app's pause-all does (branch_config.json), so the run
            # cannot end before the commands land however slow the machine is (a paused worker applies
            # its inbox while it waits; a finished branch sent a command gets a worker, paused too).
            for name in layout.branch_names():
                update_branch_config(layout.branch(name), 5, paused=True)
            # Four CLI processes; those for different branches at once (b2-strip's two in order:
            # message, then decision).
            with ThreadPoolExecutor(3) as pool:
                calls = [
                    pool.submit(lambda: [cacao(mmul_dir, "--branch", "b2-strip", "--message", MESSAGE),
                                         cacao(mmul_dir, "--branch", "b2-strip", "--decision", "continue")]),
                    pool.submit(lambda: [cacao(mmul_dir, "--branch", "b1-tiling", "--revert", "2")]),
                    pool.submit(lambda: [cacao(mmul_dir, "--branch", "b3-quad", "--delete")]),
                ]  # fmt: skip
                for call in calls:
                    assert all(done.returncode == 0 for done in call.result()), [d.stderr for d in call.result()]
            for name in layout.branch_names():
                update_branch_config(layout.branch(name), 5, paused=False)
        joined = "".join(seen[-400:])
        applied = "b2-strip #2: implementing" in joined and "- b3-quad: deleted" in joined
        if (applied and "b1-tiling.1-vec-dbuf: paused" in "".join(seen)) or time.time() > deadline:
            break
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    out = "".join(seen)
    assert held and "b1-tiling.1-vec-dbuf: paused" in out, out[-3000:]  # the run was held open
    # Applied by the live run, not by the resume.
    assert "b2-strip: message from the user" in out and "b2-strip #2: implementing" in out, out[-3000:]
    assert "- b3-quad: deleted" in out
    assert not layout.final_results.exists()
    update_branch_config(holder, 5, paused=False)  # let the resumed run finish

    resumed = subprocess.run([*argv, "--resume"], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "b3-quad" not in layout.branch_names() and (layout.output / "trash" / "b3-quad").is_dir()
    tiling = manifest(layout, "b1-tiling")
    assert tiling.superseded == [3, 4] and state(layout, "b1-tiling", 5).base_iteration == 2
    assert state(layout, "b1-tiling", 5).decision is not None
    strip = manifest(layout, "b2-strip")
    assert [m.text for m in strip.messages] == [MESSAGE]
    assert state(layout, "b2-strip", 2).decision is not None and strip.pending_decision is None
    assert len(strip.applied) == len(set(strip.applied)) == 2
