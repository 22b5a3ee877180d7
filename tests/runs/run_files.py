"""Run directories written by hand for the tests: a problem copied from problems/mmul, a run
log of the given events, a lock note naming a holder. Nothing here runs the engine."""

from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path

from cacao_tui.engine import events as ev
from cacao_tui.store.layout import RunLayout

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


def hold_note(problem_dir: Path, pid: int, host: str | None = None) -> None:
    """The note a run leaves in output.lock (without the flock: only the note is read)."""
    note = {"pid": pid, "host": host or socket.gethostname(), "started": "2026-01-02T03:04:05+00:00",
            "command": f"cacao --dir {problem_dir} --no-ui"}  # fmt: skip
    (problem_dir / "output.lock").write_text(json.dumps(note) + "\n")
