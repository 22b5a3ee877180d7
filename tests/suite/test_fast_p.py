"""fast_p (KernelBench's score) from constructed run outputs: correct, incorrect, slower kernels,
a problem never run, and a speedup exactly at a threshold (fast_p counts speedup > p)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from cacao_tui.store.atomic import write_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import BestResult, FinalResults
from cacao_tui.suite import fast_p
from tests.cluster.suite_helpers import cacao

PROBLEM = """name: {name}
grid: {{x: 1}}
reference: {{type: python, file: ref.py, function: ref}}
validation: {{tolerance: 1e-2, rtol: 1e-2, input_sets: {sets}}}
"""
INPUTS = """args:
  - {kind: buffer, name: x, size: 4}
  - {kind: buffer, name: y, size: 4, access: write, validate: true}
"""


def problem(root: Path, name: str, speedup: float | None, *, ran: bool = True, sets: int = 5) -> Path:
    """A problem directory; with ``ran``, a finished run whose best has ``speedup`` (None: no valid kernel)."""
    d = root / name
    d.mkdir(parents=True)
    (d / "problem.yaml").write_text(PROBLEM.format(name=name, sets=sets))
    (d / "inputs.yaml").write_text(INPUTS)
    (d / "ref.py").write_text("def ref(scalars, buffers):\n    return buffers['x']\n")
    if ran:
        best = None
        if speedup is not None:
            best = BestResult(branch="b1-a", iteration=1, time_ms=1.0, speedup=speedup, kernel_path="k.cu")
        layout = RunLayout(d)
        layout.output.mkdir()
        write_model(layout.final_results, FinalResults(problem_name=name, best=best, reference_ms=1.0,
                                                       speedup=speedup, total_branches=1))  # fmt: skip
    return d


@pytest.fixture
def problems(tmp_path: Path) -> list[Path]:
    return [
        problem(tmp_path, "a_fast", 2.5),
        problem(tmp_path, "b_faster", 1.5),
        problem(tmp_path, "c_slower", 0.8),
        problem(tmp_path, "d_incorrect", None),  # ran; no kernel passed validation
        problem(tmp_path, "e_never_run", None, ran=False),
        problem(tmp_path, "f_exactly_two", 2.0, sets=2),  # not > 2; and checked on 2 sets only
    ]


def test_fast_p_is_the_share_of_all_problems_correct_and_faster_than_p(problems: list[Path]) -> None:
    outcomes = [fast_p.outcome(p) for p in problems]
    assert [o.correct for o in outcomes] == [True, True, True, False, False, True]
    assert fast_p.fast_p(outcomes, 0) == pytest.approx(4 / 6)
    assert fast_p.fast_p(outcomes, 1) == pytest.approx(3 / 6)
    assert fast_p.fast_p(outcomes, 2) == pytest.approx(1 / 6)  # 2.0 is not faster than 2x
    assert fast_p.fast_p(outcomes, 0.5) == pytest.approx(4 / 6)
    assert fast_p.geomean_correct(outcomes) == pytest.approx(math.prod([2.5, 1.5, 0.8, 2.0]) ** 0.25)
    assert fast_p.fast_p([], 1) == 0.0


def test_cacao_collect_fast_p_prints_and_writes_the_fractions(problems: list[Path], tmp_path: Path) -> None:
    prefix = tmp_path / "out" / "kb"
    prefix.parent.mkdir()
    done = cacao("collect", *map(str, problems), "--fast-p", "0,1,2", "--output", str(prefix), cwd=tmp_path,
                 timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "fast_0 = 0.667 (4/6)   fast_1 = 0.500 (3/6)   fast_2 = 0.167 (1/6)" in done.stdout, done.stdout
    assert "geomean speedup of the 4 correct: 1.565x" in done.stdout
    assert "1 problem(s) validate on fewer than 5 input sets" in done.stdout and "f_exactly_two" in done.stdout
    doc = json.loads((tmp_path / "out" / "kb.fast_p.json").read_text())
    assert doc["problems"] == 6 and doc["fast_p"] == {"0": 4 / 6, "1": 0.5, "2": 1 / 6}
    assert (tmp_path / "out" / "kb.csv").is_file()  # the table is still written


@pytest.mark.parametrize("spec", ["1,x", "-1", ",", "nan"])
def test_a_bad_fast_p_list_is_one_line_and_exit_2(problems: list[Path], tmp_path: Path, spec: str) -> None:
    done = cacao("collect", str(problems[0]), f"--fast-p={spec}", "--output", str(tmp_path / "t"), cwd=tmp_path,
                 timeout=120)  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("cacao collect: error: --fast-p: ") and len(done.stderr.splitlines()) == 1
    assert not (tmp_path / "t.csv").exists()
