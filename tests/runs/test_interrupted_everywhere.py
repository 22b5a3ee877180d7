"""A run whose process died (SIGKILL mid-run: no final_results.json, its files still say running)
reads ``interrupted`` everywhere: --best, --export, the results view's rows, the home screen and
``cacao collect`` (issue 30). While a run holds the directory, the same files read ``running``.
The run is the engine on the mmul replay with the FAKE tuner (tests/engine/harness.py)."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cacao_tui.runs.last_run import last_run
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.results import FROM_BRANCHES, load_results
from cacao_tui.store.run_lock import acquire_run_lock
from cacao_tui.suite.collect import collect_row

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    problem = tmp_path_factory.mktemp("killed") / "mmul"
    shutil.copytree(ROOT / "problems" / "mmul", problem, ignore=shutil.ignore_patterns("output", "archive"))
    done = subprocess.run(
        [sys.executable, "-m", "tests.engine.harness", str(problem), "--kill-when", "b1-tiling:2:running"],
        capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=240,
    )  # fmt: skip
    assert done.returncode == -9, done.stdout[-2000:] + done.stderr[-2000:]
    assert not RunLayout(problem).final_results.exists()
    return problem


def _cacao(problem: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cacao_tui", "--dir", str(problem), *args],
        capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120,
    )  # fmt: skip


def test_best_and_export_say_interrupted(killed_run: Path, tmp_path: Path) -> None:
    best = _cacao(killed_run, "--best", "--no-ui")
    assert best.returncode == 0, best.stderr
    assert "(interrupted: no process runs it; --resume continues it)" in best.stdout.splitlines()[0]
    table = best.stdout.split("\n\n")[1].splitlines()[1:]  # the branch table, after its header
    rows = {cells[0]: cells[1] for line in table if (cells := line.removeprefix("*").split())}
    assert rows.get("b1-tiling") == "interrupted", best.stdout
    assert "running" not in rows.values() and "paused" not in rows.values(), best.stdout

    target = tmp_path / "results.csv"
    exported = _cacao(killed_run, "--best", "--export", str(target))
    assert exported.returncode == 0, exported.stderr
    table = list(csv.DictReader(target.open()))
    branch_rows = {r["branch"]: r["status"] for r in table if r["table"] == "branch"}
    assert branch_rows["b1-tiling"] == "interrupted" and "running" not in branch_rows.values()
    iteration_rows = [r for r in table if r["table"] == "iteration" and r["branch"] == "b1-tiling"]
    assert [r["status"] for r in iteration_rows][-1] == "interrupted"  # iteration 2, caught running


def test_results_view_home_and_collect_say_interrupted(killed_run: Path) -> None:
    loaded = load_results(RunLayout(killed_run))
    assert loaded.source == FROM_BRANCHES and not loaded.live
    shown = {b.name: loaded.shown_status(b.status) for b in loaded.results.branches}  # the results view's rows
    assert shown["b1-tiling"] == "interrupted" and "running" not in shown.values()
    home = last_run(killed_run)
    assert home.status == "interrupted" and home.died
    assert collect_row(killed_run).status == "interrupted"


def test_while_a_run_holds_the_directory_its_branches_are_running(killed_run: Path) -> None:
    lock = acquire_run_lock(killed_run)  # as a live run (a --resume) holds it
    try:
        loaded = load_results(RunLayout(killed_run))
        assert loaded.live and loaded.shown_status("running") == "running"
        assert collect_row(killed_run).status == "running"
        assert last_run(killed_run).status == "running"
    finally:
        lock.release()
