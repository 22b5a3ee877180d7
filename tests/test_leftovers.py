"""Leftovers ignored or announced (issue 32 item 11): what cacao writes beside the problems is in
.gitignore; cacao collect says it replaced an earlier summary; a suite's lines name the host and the
slot plainly; the *ran on* column names a local run's GPU; a clone of a read-only problem can be
edited, and does not carry the generated inputs.hpp."""

from __future__ import annotations

import asyncio
import shutil
import socket
import stat
import subprocess
from pathlib import Path

import pytest

from cacao_tui.cli import main as cli_main
from cacao_tui.store.clone import clone_problem
from cacao_tui.suite.collect import COLUMNS, collect_row
from cacao_tui.suite.runner import SuiteRun, _run_one
from cacao_tui.suite.slots import dry_run_slots
from ktt.problem import load_problem
from ktt.problem.inputs_hpp import write_inputs_hpp
from tests.runs.run_files import copy_problem, finished_run_events, started, write_log

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(), reason="not a git checkout")
def test_what_cacao_writes_beside_the_problems_is_ignored() -> None:
    for path in ("suite_results/summary.csv", "problems/.trash/mmul-20260101-000000/problem.yaml"):
        done = subprocess.run(["git", "check-ignore", "-q", path], cwd=REPO, timeout=30)
        assert done.returncode == 0, f"{path} is not ignored"


def test_collect_says_it_replaces_an_earlier_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    problem = copy_problem(tmp_path / "problems")
    write_log(problem, finished_run_events())
    monkeypatch.chdir(tmp_path)
    assert cli_main(["collect", str(problem)]) == 0
    assert "replacing" not in capsys.readouterr().out
    assert cli_main(["collect", str(problem)]) == 0
    out = capsys.readouterr().out
    assert "(replacing the earlier summary.csv and summary.md" in out, out


def test_a_suites_start_line_names_the_host_and_the_slot(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    (tmp_path / "out" / "logs").mkdir(parents=True)
    said: list[str] = []
    run = SuiteRun(problem, problem.name)
    asyncio.run(_run_one(run, dry_run_slots(2)[0], ["--check"], tmp_path / "out", said.append))
    assert said[0] == f"suite: mmul: started on {socket.gethostname()} (dry-run slot 1)", said


def test_ran_on_names_a_local_runs_gpu_or_says_it_had_none(tmp_path: Path) -> None:
    gpu = copy_problem(tmp_path, "ongpu")
    write_log(gpu, [started(dry_run=False, gpus=[1])])
    dry = copy_problem(tmp_path, "dry")
    write_log(dry, [started(dry_run=True, gpus=[0])])
    ran_on = COLUMNS.index("ran on")
    assert collect_row(gpu).cells()[ran_on] == "local:GPU1"
    assert collect_row(dry).cells()[ran_on] == "no GPU (dry run)"


def test_a_clone_of_a_read_only_problem_is_writable_without_the_generated_header(tmp_path: Path) -> None:
    source = copy_problem(tmp_path, "mmul")
    write_inputs_hpp(load_problem(source))  # the header cacao generates (a clone leaves it out)
    for path in [source, *source.rglob("*")]:
        path.chmod(stat.S_IMODE(path.stat().st_mode) & ~0o222)
    try:
        cloned = clone_problem(source, "mine")
    finally:
        for path in [source, *source.rglob("*")]:
            path.chmod(stat.S_IMODE(path.stat().st_mode) | 0o200)
    assert not (cloned.target / "inputs.hpp").exists()
    for path in [cloned.target, *cloned.target.rglob("*")]:
        assert path.stat().st_mode & stat.S_IWUSR, path
    assert (cloned.target / "problem.yaml").is_file() and (cloned.target / "ref_kernel.cu").is_file()
