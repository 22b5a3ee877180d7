"""Run directories written by hand for the tests: a problem copied from problems/mmul, a run
log of the given events, a lock note naming a holder. Nothing here runs the engine."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from cacao_tui.engine import events as ev
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import TuneOutcome

REPO = Path(__file__).resolve().parents[2]
MMUL = REPO / "problems" / "mmul"


def copy_problem(folder: Path, name: str = "mmul", source: Path = MMUL) -> Path:
    target = folder / name
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("output", "archive", "demo"))
    if name != source.name:
        text = (target / "problem.yaml").read_text()
        (target / "problem.yaml").write_text(text.replace(f"name: {source.name}", f"name: {name}", 1))
    return target


def started(**changes: object) -> ev.RunStarted:
    fields: dict[str, object] = dict(
        ts=1_767_300_000.0, problem="mmul", problem_dir="/x", provider="replay", model="replay", gpus=[0],
        dry_run=True, max_iter=3, max_depth=1, n_strategies=2,
    )  # fmt: skip
    fields.update(changes)
    return ev.RunStarted(**fields)  # type: ignore[arg-type]


def write_log(problem_dir: Path, events: list[ev._Event], *, mtime: float | None = None) -> Path:
    layout = RunLayout(problem_dir)
    layout.output.mkdir(parents=True, exist_ok=True)
    with layout.run_log.open("a", encoding="utf-8") as f:
        for e in events:
            f.write(e.model_dump_json() + "\n")
    if mtime is not None:
        os.utime(layout.run_log, (mtime, mtime))
    return layout.run_log


_HOLDER = """
import fcntl, json, os, socket, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
note = {"pid": os.getpid(), "host": socket.gethostname(), "started": "2026-01-02T03:04:05+00:00", "command": "cacao"}
os.ftruncate(fd, 0)
os.pwrite(fd, (json.dumps(note) + "\\n").encode(), 0)
print("held", flush=True)
time.sleep(120)
"""


def start_holder(problem_dir: Path) -> subprocess.Popen[str]:
    """A process that holds the directory's run lock (the flock) with its note, as a live run does."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(problem_dir / "output.lock")],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def hold_note(problem_dir: Path, pid: int, host: str | None = None) -> None:
    """The note a run leaves in output.lock, without the flock: what a killed run leaves (or anyone writes)."""
    note = {"pid": pid, "host": host or socket.gethostname(), "started": "2026-01-02T03:04:05+00:00",
            "command": f"cacao --dir {problem_dir.parent.name}/{problem_dir.name} --no-ui"}  # fmt: skip
    (problem_dir / "output.lock").write_text(json.dumps(note) + "\n")


T0 = 1_767_300_000.0  # 2026-01-01 20:40 UTC: fixed times for snapshots


def finished_run_events(problem: str = "mmul", t0: float = T0) -> list[ev._Event]:
    """A small finished run, as its run log would hold it (two branches, one best)."""
    return [
        started(ts=t0, problem=problem),
        ev.MasterPhase(ts=t0 + 1, phase="analyzing"),
        ev.MasterPhase(ts=t0 + 2, phase="dispatched", message="2 branches"),
        ev.BranchAdded(ts=t0 + 2, branch="b1-tiling", title="Shared-memory tiling", description="tiles", max_iter=3),
        ev.BranchAdded(ts=t0 + 2, branch="b2-strip", title="Row strips", description="strips", max_iter=3),
        ev.BranchStatusChanged(ts=t0 + 3, branch="b1-tiling", status="running", iteration=1, max_iter=3),
        ev.IterationStatusChanged(ts=t0 + 3, branch="b1-tiling", iteration=1, status="planning"),
        ev.LogLine(ts=t0 + 4, message="plan: 16x16 tiles in shared memory", branch="b1-tiling", iteration=1),
        ev.TuningFinished(ts=t0 + 9, branch="b1-tiling", iteration=1, outcome=TuneOutcome(
            ran=True, best_ms=1.2, speedup=3.25, evaluated=12, valid=10, best_config={"TILE": 16})),
        ev.NewBest(ts=t0 + 9, branch="b1-tiling", iteration=1, time_ms=1.2, speedup=3.25, run_best=True),
        ev.IterationStatusChanged(ts=t0 + 10, branch="b1-tiling", iteration=1, status="decided"),
        ev.BranchStatusChanged(ts=t0 + 11, branch="b1-tiling", status="done", iterations_done=1, max_iter=3,
                               reason="close to the roof"),
        ev.BranchStatusChanged(ts=t0 + 11, branch="b2-strip", status="failed", iterations_done=1, max_iter=3,
                               reason="no kernel compiled"),
        ev.MasterPhase(ts=t0 + 12, phase="finished"),
        ev.RunFinished(ts=t0 + 12, status="ok", best_ms=1.2, speedup=3.25, best_branch="b1-tiling"),
    ]


def problems_folder(folder: Path) -> Path:
    """mmul (finished ok), stencil (never run), softmax (killed), transpose (live, on another host)."""
    folder.mkdir(parents=True, exist_ok=True)
    mmul = copy_problem(folder, "mmul")
    write_log(mmul, finished_run_events(), mtime=T0 + 12)
    copy_problem(folder, "stencil", REPO / "problems" / "stencil")
    softmax = copy_problem(folder, "softmax", REPO / "problems" / "softmax")
    write_log(softmax, [started(ts=T0, problem="softmax", dry_run=False)], mtime=T0 + 5)
    transpose = copy_problem(folder, "transpose", REPO / "problems" / "transpose")
    write_log(transpose, [started(ts=T0, problem="transpose", dry_run=False, gpus=[1])], mtime=T0 + 7)
    hold_note(transpose, 4242, host="gpu-box-2")
    return folder
