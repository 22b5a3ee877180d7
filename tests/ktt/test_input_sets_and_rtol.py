"""validation.input_sets, validation.rtol and init: normal (our extensions, for KernelBench's
problems: five correctness trials, torch.allclose's tolerance, torch.randn's inputs), on the
worker's own evaluation with a FAKE GPU (tests/ktt/fake_launch_gpu.py), as test_worker_init_data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from fake_launch_gpu import FakeGpu, fake_session

from ktt.candidates import launch_plan
from ktt.inputs import make_inputs
from ktt.problem import ProblemError, load_problem
from ktt.problem.model import Problem
from ktt.spec import load_spec_text

SPEC = """tune_params: {BLOCK: [32]}
launches:
  - {kernel: k, grid: {x: 1}, block: {x: BLOCK}}
"""
N = 4096


def make_problem(tmp_path: Path, validation: str, x_init: str = "init: random, min: 0, max: 1") -> Problem:
    d = tmp_path / "p"
    d.mkdir(parents=True)
    (d / "problem.yaml").write_text(
        "name: p\ngrid: {x: 1}\nreference: {type: python, file: ref.py, function: ref}\n"
        f"validation:\n{validation}"
    )
    (d / "inputs.yaml").write_text(
        f"args:\n  - {{kind: scalar, name: LEN, value: {N}}}\n"
        f"  - {{kind: buffer, name: X, dtype: float, size: LEN, {x_init}, seed: 3}}\n"
        "  - {kind: buffer, name: Y, dtype: float, size: LEN, access: write, init: zeros, validate: true}\n"
    )
    (d / "ref.py").write_text("def ref(scalars, buffers):\n    return buffers['X'] * 2\n")
    return load_problem(d)


def evaluate(problem: Problem, kernel, work: Path) -> tuple[dict, FakeGpu]:
    s = fake_session(problem, {"k": kernel}, work, {"Y": lambda inp: inp["X"] * 2})
    program, scratch = launch_plan(load_spec_text(SPEC, problem), {"BLOCK": 32}, problem.primary)
    return s.evaluate({"cubin_hex": "00", "launches": program, "scratch": scratch}), s.gpu


def twice(gpu: FakeGpu, grid, block, x: int, y: int) -> None:
    gpu.view(y, 4 * N, np.float32)[:] = gpu.view(x, 4 * N, np.float32) * 2


def test_a_best_is_confirmed_on_every_fresh_input_set(tmp_path: Path) -> None:
    problem = make_problem(tmp_path, "  tolerance: 1e-5\n  input_sets: 5\n")
    assert problem.set_indices == [0, 1, 2, 3, 4]
    result, gpu = evaluate(problem, twice, tmp_path / "w")
    assert result["status"] == "ok" and result["confirmed"], result.get("error")
    # validation, race re-run, 3 timed repetitions, then one run on each of the 4 fresh sets
    assert len([r for r in gpu.launches() if r.kernel == "k"]) == 5 + 4


def test_a_kernel_wrong_only_on_the_last_input_set_is_caught(tmp_path: Path) -> None:
    problem = make_problem(tmp_path, "  tolerance: 1e-5\n  input_sets: 5\n")
    last = make_inputs(problem, problem.primary, 4, 0, tmp_path / "w")["X"][0]

    def special(gpu: FakeGpu, grid, block, x: int, y: int) -> None:
        twice(gpu, grid, block, x, y)
        if gpu.view(x, 4, np.float32)[0] == last:  # it recognises set 4's data
            gpu.view(y, 4, np.float32)[0] = 0.0

    result, _ = evaluate(problem, special, tmp_path / "w")
    assert result["status"] == "validation_failed"
    assert result["error"].startswith("wrong on fresh input set 4 of 4: Y: 1 of 4096"), result["error"]
    two = make_problem(tmp_path / "two", "  tolerance: 1e-5\n")  # the default: set 4 is never drawn
    assert evaluate(two, special, tmp_path / "w2")[0]["status"] == "ok"


def test_rtol_scales_the_tolerance_with_the_reference(tmp_path: Path) -> None:
    def off_by_half_a_percent(gpu: FakeGpu, grid, block, x: int, y: int) -> None:
        gpu.view(y, 4 * N, np.float32)[:] = gpu.view(x, 4 * N, np.float32) * 2 * 1.005 + 10.0

    def shifted(validation: str) -> Problem:
        # X in [1000, 1001]: |Y| ~ 2000, so the error is ~20 absolute, 1 % relative
        return make_problem(tmp_path / validation.strip().replace(" ", "").replace(":", "_").replace("\n", "-"),
                            validation, "init: random, min: 1000, max: 1001")  # fmt: skip

    relative = shifted("  tolerance: 0\n  rtol: 1.5e-2\n")
    assert relative.rtol == 1.5e-2
    assert evaluate(relative, off_by_half_a_percent, tmp_path / "w1")[0]["status"] == "ok"
    absolute = shifted("  tolerance: 1e-2\n")
    result, _ = evaluate(absolute, off_by_half_a_percent, tmp_path / "w2")
    assert result["status"] == "validation_failed" and "4096 of 4096" in result["error"]


def test_init_normal_draws_a_normal_distribution_afresh_for_each_set(tmp_path: Path) -> None:
    problem = make_problem(tmp_path, "  tolerance: 1e-5\n", "init: normal, mean: 3, std: 0.5")
    sets = [make_inputs(problem, problem.primary, k, 0, tmp_path / "w")["X"] for k in (0, 1)]
    for x in sets:
        assert x.dtype == np.float32 and abs(float(x.mean()) - 3) < 0.05 and abs(float(x.std()) - 0.5) < 0.05
    assert not np.array_equal(sets[0], sets[1])
    again = make_inputs(problem, problem.primary, 0, 0, tmp_path / "w")["X"]
    assert np.array_equal(again, sets[0])  # set 0 is the same in every run


def test_mean_without_init_normal_a_zero_std_and_one_input_set_are_one_line_errors(tmp_path: Path) -> None:
    for i, (x_init, field, text) in enumerate(
        [
            ("init: random, mean: 1", "args[1] (X).mean", "only used with init: normal"),
            ("init: normal, std: 0", "args[1] (X).std", "greater than 0"),
        ]
    ):
        try:
            make_problem(tmp_path / str(i), "  tolerance: 1e-5\n", x_init)
        except ProblemError as exc:
            assert field in exc.line() and text in exc.line(), exc.line()
        else:
            raise AssertionError(f"{x_init} was accepted")
    try:
        make_problem(tmp_path / "sets", "  input_sets: 1\n")
    except ProblemError as exc:
        assert "validation.input_sets" in exc.line(), exc.line()
    else:
        raise AssertionError("input_sets: 1 was accepted")
