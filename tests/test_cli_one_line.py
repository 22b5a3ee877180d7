"""One line per mistake, with one prefix (issue 32 item 10): a flag's mistake reads
``cacao: error: ...`` with its hint on the same line, never a second ``hint:`` line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.pathenv import child_pythonpath

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--dri", "x"], "unrecognized arguments: --dri x; run 'cacao --help' for the flags"),
        (["--dir", "problems/nosuch", "--check"], "--dir problems/nosuch: no such directory"),
        (["--dir", "README.md", "--best"], "--dir README.md: not a directory"),
        (["--dir", "problems/mmul", "--max-iter", "0"], "argument --max-iter: must be at least 1"),
    ],
)
def test_a_mistake_in_a_flag_is_one_line_with_one_prefix(argv: list[str], words: str) -> None:
    done = subprocess.run([sys.executable, "-m", "cacao_tui", *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": child_pythonpath()})  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("cacao: error: ") and words in lines[0], lines[0]


def test_a_problem_files_mistake_and_its_hint_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cacao_tui.cli import main
    from tests.runs.run_files import copy_problem

    problem = copy_problem(tmp_path)
    text = (problem / "problem.yaml").read_text()
    (problem / "problem.yaml").write_text(text + "\nbroken: [unclosed\n")
    assert main(["--dir", str(problem), "--check"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{problem}/problem.yaml: "), lines
    assert "YAML syntax error" in lines[0] and "; quote values" in lines[0]
