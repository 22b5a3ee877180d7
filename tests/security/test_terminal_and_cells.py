"""Issue 23, items 8 and 9: strings from disk, the model or a directory name reach no terminal raw
(one helper, ``ktt.terminal_text.safe_text``), and no CSV or Markdown cell starts a formula.

Before: ``run_finished.status`` retitled the home screen's pane; the refusal line for an
output/ link quoted readlink raw; ``cacao suite`` printed directory names raw; a newline in a
problem's name forged a second ``--check`` line; ``cacao collect`` and ``--best --export`` wrote
cells starting with ``= + - @`` as they were (a model's decision reason, a directory name, a
status or a host).
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from cacao_tui.runs.last_run import last_run
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.results import FROM_FILE, LoadedResults
from cacao_tui.store.results_export import csv_cell, render_csv, render_markdown
from cacao_tui.store.state import BranchSummary, FinalResults, IterationPoint
from cacao_tui.suite.collect import Row, to_csv, to_markdown
from cacao_tui.suite.runner import SuiteRun, _run_one
from cacao_tui.suite.slots import Slot
from tests.pathenv import child_pythonpath
from tests.runs.run_files import copy_problem, started, write_log

ROOT = Path(__file__).resolve().parents[2]
TITLE = "\x1b]0;pwned\x07"
FORMULAS = ('=HYPERLINK("http://evil/","x")', "+cmd|' /C calc'!A0", "-2+3+cmd|' /C calc'!A0", "@SUM(1+1)*cmd|x")


def _cacao(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": child_pythonpath()}
    return subprocess.run([sys.executable, "-m", "cacao_tui", *argv], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=120)  # fmt: skip


def raw(text: str) -> list[str]:
    return sorted({c for c in text if not c.isprintable() and c != "\n"})


def test_a_run_status_with_an_escape_sequence_is_escaped(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    write_log(problem, [started()])
    with RunLayout(problem).run_log.open("a") as f:
        f.write(json.dumps({"type": "run_finished", "status": TITLE, "message": f"m {TITLE}"}) + "\n")
    last = last_run(problem)
    assert not raw(last.status) and "\\x1b]0;pwned" in last.status
    assert last.message is not None and not raw(last.message)


def test_the_refusal_for_an_output_link_quotes_the_target_escaped(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    os.symlink(f"/tmp/{TITLE}\nOK: forged line", problem / "output")
    result = _cacao("--dir", str(problem), "--no-ui", "--dry-run", "--provider", "replay", cwd=tmp_path)
    assert result.returncode == 2
    assert not raw(result.stderr) and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "\\x1b]0;pwned" in result.stderr and "\\x0aOK: forged line" in result.stderr
    assert not (problem / "output.lock").exists()  # refused before the lock: nothing left behind


def test_a_newline_in_a_problem_name_forges_no_check_line(tmp_path: Path) -> None:
    problem = tmp_path / "demo"
    shutil.copytree(ROOT / "problems" / "mmul", problem, ignore=shutil.ignore_patterns("output", "archive", "demo"))
    forged = 'name: "mmul\\n\\nOK: /etc is a valid problem"'
    (problem / "problem.yaml").write_text((problem / "problem.yaml").read_text().replace("name: mmul", forged, 1))
    result = _cacao("--dir", str(problem), "--check", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert [line for line in result.stdout.splitlines() if line.startswith("OK:")] == [
        f"OK: {problem.name} is a valid problem"
    ]
    assert "mmul\\x0a\\x0aOK: /etc is a valid problem" in result.stdout


def test_suite_progress_lines_escape_directory_names(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path, "p\x1b]0;pwned\x07\nsuite: forged")
    (tmp_path / "out" / "logs").mkdir(parents=True)
    said: list[str] = []
    run = SuiteRun(problem, problem.name)
    asyncio.run(_run_one(run, Slot("dry run 1", ()), ["--check"], tmp_path / "out", said.append))
    assert len(said) == 2 and all(not raw(line) and "\n" not in line for line in said), said
    assert "\\x1b]0;pwned" in said[0]


def test_collect_cells_are_never_formulas() -> None:
    rows = [Row(problem=f, status=f, ran_on=[f]) for f in FORMULAS]
    for text in (to_csv(rows), to_markdown(rows)):
        assert not any(f in text.replace("\\|", "|") and "'" + f not in text.replace("\\|", "|") for f in FORMULAS)
    cells = [c for line in csv.reader(io.StringIO(to_csv(rows))) for c in line]
    assert not [c for c in cells if c[:1] in ("=", "+", "@") or (c[:1] == "-" and not _number(c))]


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_export_cells_are_never_formulas(tmp_path: Path) -> None:
    branches = [
        BranchSummary(
            name=f"b{i}",
            title="t",
            status="done",
            iterations=1,
            stop_reason=f,
            timeline=[IterationPoint(iteration=1, status="decided", action=f)],
        )
        for i, f in enumerate(FORMULAS)
    ]
    results = FinalResults(problem_name=FORMULAS[0], branches=branches, complete=True, reference_ms=1.5)
    loaded = LoadedResults(results, FROM_FILE, [])
    cells = [c for line in csv.reader(io.StringIO(render_csv(loaded))) for c in line]
    assert "1.5" in cells and csv_cell("-1.5") == "-1.5"  # a number stays a number (a time of -1.5 ms is none)
    assert not [c for c in cells if c[:1] in ("=", "+", "@") or (c[:1] == "-" and not _number(c))]
    md = render_markdown(loaded, RunLayout(tmp_path))
    for f in FORMULAS:
        assert f"| {f}" not in md.replace("\\|", "|")
