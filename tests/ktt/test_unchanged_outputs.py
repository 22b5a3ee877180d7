"""An output whose reference result is its init data (issue 19's init contract): no comparison can
tell a kernel that writes nothing from a right one there, so the worker names such outputs and
``ktt tune`` warns with the fix (poison_outputs). Driven on the FAKE GPU of fake_launch_gpu; the
same case on the H200: tests/ktt/test_gpu_tuning.py::
test_an_output_that_equals_its_init_is_warned_of_and_caught_by_the_poison.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from fake_launch_gpu import fake_session
from test_worker_init_data import make_problem

from ktt.mismatch import same_bits, unchanged_output_warning


def _noop(**_: object) -> None:
    return None


def test_an_output_left_at_its_init_data_is_named(tmp_path: Path) -> None:
    problem = make_problem(tmp_path, init="zeros", size="N")
    s = fake_session(problem, {"k": _noop}, tmp_path / "work", {"S": lambda inputs: np.zeros(4096, np.float32)})
    assert s._unchanged((0, 1)) == [{"name": "S", "access": "write"}]


def test_an_output_the_reference_changes_is_not_named(tmp_path: Path) -> None:
    problem = make_problem(tmp_path, init="zeros", size="1")
    s = fake_session(problem, {"k": _noop}, tmp_path / "work",
                     {"S": lambda inputs: inputs["S"] + inputs["X"].sum()})  # fmt: skip
    assert s._unchanged((0, 1)) == []


def test_one_set_that_changes_the_output_is_enough(tmp_path: Path) -> None:
    problem = make_problem(tmp_path, init="zeros", size="1")
    s = fake_session(problem, {"k": _noop}, tmp_path / "work",
                     {"S": lambda inputs: inputs["S"] + (1.0 if inputs["X"][0] == 0 else 0.0)})  # fmt: skip
    x0 = {k: s.bufs.host[(k, "X")][0] for k in (0, 1)}
    assert all(v != 0 for v in x0.values())  # neither set has X[0] == 0: both stay at init
    assert s._unchanged((0, 1)) == [{"name": "S", "access": "write"}]
    s.bufs.set_reference(1, "S", np.ones(1, np.float32))
    assert s._unchanged((0, 1)) == []


def test_a_poisoned_output_is_not_named(tmp_path: Path) -> None:
    problem = make_problem(tmp_path, init="zeros", size="N", extra="  poison_outputs: true\n")
    s = fake_session(problem, {"k": _noop}, tmp_path / "work", {"S": lambda inputs: np.zeros(4096, np.float32)})
    assert s._unchanged((0, 1)) == []


def test_same_bits_and_the_warning() -> None:
    a = np.array([0.0, np.nan], np.float32)
    assert same_bits(a, a.copy())
    assert not same_bits(a, np.array([-0.0, np.nan], np.float32))  # -0.0 is not what init wrote
    assert not same_bits(a, np.zeros(3, np.float32))
    assert "poison_outputs: true" in unchanged_output_warning("Y", "write")
    assert "poison_outputs" not in unchanged_output_warning("Y", "readwrite")  # poisoning is for write buffers
