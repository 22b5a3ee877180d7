"""Issue 23, item 3: a launch program is bounded by the nodes it evaluates, not only by its launches.

A 901-byte model-written tuning.yaml of nested ``repeat`` loops whose innermost body makes no
launch (a ``count`` of 0) made no launch the budget could count, yet built one node per pass:
``ktt check`` reached 4.8 GB, the model's ``check_compilation`` 5.4 GB in 60 s. Now every
launch, loop and evaluated pass counts against ``MAX_PROGRAM_NODES``: the configuration fails
as ``launch geometry`` in about a second, naming the loop.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from bounds_problem import ktt_check_argv, make_problem, run_measured

from ktt.expressions import ExpressionError
from ktt.launch_program import MAX_PROGRAM_NODES, evaluate_program, launches_per_run
from ktt.problem import load_problem
from ktt.spec import load_spec_text
from tests.pathenv import child_pythonpath

pytestmark = pytest.mark.timeout(120)


def zero_launch_loops(passes: int = 10_000) -> str:
    return f"""tune_params: {{BLOCK: [32, 64], UNROLL: [1], BEHAVIOUR: [0]}}
launches:
  - repeat:
      var: i
      count: {passes}
      body:
        - repeat:
            var: j
            count: {passes} + i * 0
            body:
              - repeat:
                  var: k
                  count: j * 0
                  body:
                    - {{kernel: scale, grid: {{x: (N + BLOCK - 1) / BLOCK}}, block: {{x: BLOCK}}}}
"""


def test_nested_loops_without_launches_are_refused_quickly(tmp_path: Path) -> None:
    problem = load_problem(make_problem(tmp_path))
    spec = load_spec_text(zero_launch_loops(), problem)
    started = time.monotonic()
    with pytest.raises(ExpressionError) as info:
        evaluate_program(spec, {"BLOCK": 32, "UNROLL": 1, "BEHAVIOUR": 0}, problem.primary)
    assert time.monotonic() - started < 20  # about 1-2 s at the cap on a loaded 2-core machine
    message = str(info.value)
    assert message.startswith("launches[0].repeat.body[0].repeat")
    assert f"more than {MAX_PROGRAM_NODES:,} launches, loops and passes" in message and "\n" not in message


def test_a_large_legitimate_program_still_evaluates(tmp_path: Path) -> None:
    problem = load_problem(make_problem(tmp_path))
    text = """tune_params: {BLOCK: [32], UNROLL: [1], BEHAVIOUR: [0]}
launches:
  - repeat:
      var: p
      count: 10000
      body:
        - {kernel: scale, grid: {x: p + 1}, block: {x: BLOCK}}
        - {kernel: scale, grid: {x: 1}, block: {x: BLOCK}}
"""
    nodes = evaluate_program(load_spec_text(text, problem), {"BLOCK": 32, "UNROLL": 1, "BEHAVIOUR": 0}, problem.primary)
    assert launches_per_run(nodes) == 20_000


def test_ktt_check_of_the_hostile_spec_is_bounded_in_time_and_memory(tmp_path: Path) -> None:
    root = make_problem(tmp_path)
    (root / "tuning.yaml").write_text(zero_launch_loops())
    assert len((root / "tuning.yaml").read_bytes()) < 1000
    env = {**os.environ, "PYTHONPATH": child_pythonpath()}
    argv = ktt_check_argv(root, tmp_path / "cache", "--sample", "2")
    code, out, err, took, max_rss_kib = run_measured(argv, env, 100)
    assert code == 1, err[-2000:]
    report = json.loads(out.strip().splitlines()[-1])
    assert report["configs"] and all("launch geometry" in c["error"] for c in report["configs"])
    assert "Traceback" not in err
    assert max_rss_kib < 600 * 1024, max_rss_kib  # before: 4.8 GB
    assert took < 60, took
