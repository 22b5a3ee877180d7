"""``cacao suite`` and ``cacao collect`` on this machine (no Ray): runs in parallel, each a
normal run in its own output/, then one table; every bad argument is one line, exit 2."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from cacao_tui.suite.collect import collect_row, render_table, to_markdown
from cacao_tui.suite.runner import unique_names
from tests.cluster.suite_helpers import cacao, mmul_copies


def test_a_dry_run_suite_runs_each_problem_and_collects_a_table(tmp_path: Path) -> None:
    problems = mmul_copies(tmp_path, 2)
    out = tmp_path / "results"
    done = cacao("suite", *map(str, problems), "--dry-run", "--provider", "replay", "--max-iter", "1",
                 "--jobs", "2", "--output", str(out), cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 at a time" in done.stdout
    starts = [line for line in done.stdout.splitlines() if ": started on " in line and "(dry-run slot" in line]
    assert len(starts) == 2
    for p in problems:
        assert (p / "output" / "final_results.json").is_file()
        assert (out / "logs" / f"{p.name}.log").read_text().strip().endswith(".json")
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert [r["problem"] for r in rows] == ["mmul1", "mmul2"]
    assert all(r["status"] == "ok (dry run)" and int(r["branches"]) == 3 and float(r["run time s"]) > 0 for r in rows)
    assert (out / "summary.md").read_text().startswith("| problem | status | best speedup |")
    # collect alone reads the same runs again
    again = cacao("collect", *map(str, problems), "--output", str(tmp_path / "t"), cwd=tmp_path)
    assert again.returncode == 0 and (tmp_path / "t.csv").read_text() == (out / "summary.csv").read_text()


def test_collect_makes_its_default_folder(tmp_path: Path) -> None:
    """``cacao collect DIR`` in a directory without suite_results/ (it used to refuse: no such directory)."""
    (problem,) = mmul_copies(tmp_path, 1)
    done = cacao("collect", str(problem), cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "suite_results"
    assert (out / "summary.csv").is_file() and (out / "summary.md").is_file()
    assert "collect: wrote suite_results/summary.csv" in done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["suite"], "the following arguments are required: DIR"),
        (["suite", "nowhere"], "nowhere: no such problem directory"),
        (["suite", "P", "P"], "given twice"),
        (["suite", "P", "--jobs", "0"], "--jobs: must be at least 1"),
        (["suite", "P", "--cluster", "slurm"], "expected local, ray"),
        (["suite", "P", "--provider", "nobody"], "unknown provider"),
        (["suite", "P", "--gpus", "0,0", "--dry-run"], "--gpus: expected distinct"),
        (["collect", "P", "--output", "no/such/dir/x"], "no/such/dir: no such directory"),
        (["collect", "P", "--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "P").mkdir()
    (tmp_path / "P" / "problem.yaml").write_text("name: x\n")
    done = cacao(*args, cwd=tmp_path, timeout=60)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["P"]  # nothing written


def test_a_problem_with_a_broken_file_stops_the_suite_before_any_run(tmp_path: Path) -> None:
    problems = mmul_copies(tmp_path, 2)
    (problems[1] / "problem.yaml").write_text("name: [unclosed\n")
    done = cacao("suite", *map(str, problems), "--dry-run", "--provider", "replay", cwd=tmp_path, timeout=60)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "problem.yaml" in done.stderr
    assert not (problems[0] / "output").exists()


def test_collect_of_a_problem_never_run_and_names_kept_apart(tmp_path: Path) -> None:
    (tmp_path / "a" / "x").mkdir(parents=True)
    row = collect_row(tmp_path / "a" / "x")
    assert row.status == "no run" and row.speedup is None
    assert "| x | no run |" in to_markdown([row]) and render_table([row]).splitlines()[1].startswith("x ")
    assert unique_names([Path("a/x"), Path("b/x"), Path("c/y")]) == ["x", "x-2", "y"]
