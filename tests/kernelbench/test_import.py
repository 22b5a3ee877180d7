"""``cacao import``: KernelBench-form modules (our own fixtures) become problems that --check
passes, whose boundary is KernelBench's (inputs, weights, outputs), whose weights and data are the
module's own, and whose reference is the module's forward (checked here on the CPU)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ktt.inputs import make_inputs
from ktt.problem import load_problem
from tests.kernelbench.conftest import FIXTURES, IMPORTED, ROOT, cacao


def _module(path: Path):
    spec = importlib.util.spec_from_file_location(f"fixture_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _model(torch, name: str):
    """The fixture's Model built as KernelBench's harness builds it (seed 42 before each step)."""
    module = _module(FIXTURES / f"{name}.py")
    torch.manual_seed(42)
    init = module.get_init_inputs()
    torch.manual_seed(42)
    return module, module.Model(*init)


def test_a_level_folder_imports_with_a_summary_of_what_was_refused(level) -> None:
    problems, done = level
    assert done.returncode == 1, done.stdout + done.stderr  # four imported, one refused
    out = done.stdout
    assert "import: 4 imported, 1 refused, of 5 modules" in out, out
    for name in IMPORTED:
        assert f"imported {name}.py -> " in out and (problems / f"level1_{name}").is_dir()
    assert "refused no_init_inputs.py: not in KernelBench's form: no get_init_inputs()" in out
    assert sorted(p.name for p in problems.iterdir()) == sorted(f"level1_{n}" for n in IMPORTED)  # nothing else


@pytest.mark.parametrize("name", IMPORTED)
def test_each_imported_problem_passes_check(level, name: str) -> None:
    problems, _ = level
    done = cacao("--dir", str(problems / f"level1_{name}"), "--check", cwd=problems, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().splitlines()[-1].startswith("OK: ")
    assert "a best must pass 5 input sets" in done.stdout
    assert "|kernel - reference| <= 0.01 + 0.01 * |reference|" in done.stdout


def test_the_boundary_is_inputs_then_weights_then_outputs(level) -> None:
    problems, _ = level
    p = load_problem(problems / "level1_conv_relu_bn")
    assert p.boundary_signature() == (
        "const float* x, const float* conv_weight, const float* conv_bias, const float* bn_weight, "
        "const float* bn_bias, const float* bn_running_mean, const float* bn_running_var, "
        "const long long* bn_num_batches_tracked, float* out"
    )
    assert (p.tolerance, p.rtol, p.input_sets, p.poison_outputs) == (0.01, 0.01, 5, True)
    sizes = p.primary.sizes
    assert sizes["x"] == 8 * 3 * 32 * 32 and sizes["conv_weight"] == 16 * 3 * 3 * 3 and sizes["out"] == 8 * 16 * 30 * 30
    assert p.primary.scalars["BATCH_SIZE"] == 8 and p.primary.scalars["OUT_CHANNELS"] == 16
    assert "KernelBench's" in " ".join(p.rules_text) and "weights" in " ".join(p.rules_text)
    two = load_problem(problems / "level1_row_stats")
    assert [b.name for b in two.validated] == ["out0", "out1"]
    assert two.primary.sizes["out0"] == 64 * 1000 and two.primary.sizes["out1"] == 64


def test_inputs_are_drawn_as_the_module_draws_them(level) -> None:
    problems, _ = level
    x = load_problem(problems / "level1_relu").buffers[0]
    assert (x.init, x.normal_params) == ("normal", (0.0, 1.0))  # torch.randn
    x = load_problem(problems / "level1_conv_relu_bn").buffers[0]
    assert (x.init, x.value_range) == ("random", (0.0, 1.0))  # torch.rand
    x = load_problem(problems / "level1_row_stats").buffers[0]
    assert (x.init, x.value_range) == ("random", (-4.0, 4.0))  # empty(...).uniform_(-4, 4)
    loss = load_problem(problems / "level1_heavy_tail_loss")
    logits, targets = loss.buffers[0], loss.buffers[1]
    assert logits.init == "file"  # LogNormal: not a distribution inputs.yaml draws
    assert (targets.dtype, targets.init, targets.value_range) == ("long", "random", (0.0, 9.0))  # randint(0, 10)


def test_weights_and_file_inputs_are_the_modules_own_data(torch, level) -> None:
    problems, _ = level
    _, model = _model(torch, "conv_relu_bn")
    d = problems / "level1_conv_relu_bn"
    for key, t in model.state_dict().items():
        name = key.replace(".", "_")
        data = np.fromfile(d / "inputs" / f"{name}.bin", dtype=t.numpy().dtype)
        assert np.array_equal(data, t.numpy().ravel()), key
    module, _ = _model(torch, "heavy_tail_loss")
    torch.manual_seed(42)
    logits, _ = module.get_inputs()
    data = np.fromfile(problems / "level1_heavy_tail_loss" / "inputs" / "logits.bin", dtype=np.float32)
    assert np.array_equal(data, logits.numpy().ravel())


@pytest.mark.parametrize("name", ["conv_relu_bn", "row_stats", "heavy_tail_loss"])
def test_the_reference_is_the_modules_forward_on_every_input_set(torch, level, tmp_path: Path, name: str) -> None:
    """ktt's host reference (ref.py, on the CPU here) against the fixture's forward computed in this test."""
    problems, _ = level
    d = problems / f"level1_{name}"
    work = tmp_path / "work"
    cmd = [sys.executable, "-m", "ktt.host_reference", "--problem", str(d), "--work", str(work), "--shape", "default",
           "--sets", "0,1,2,3,4", "--seed", "7"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={"PYTHONPATH": str(ROOT)}, check=False)
    assert done.returncode == 0, done.stderr
    problem = load_problem(d)
    _, model = _model(torch, name)
    table = _module(d / "ref.py")  # its CACAO_INPUTS and CACAO_OUTPUTS: (buffer, torch dtype, shape)
    previous = None
    for s in range(5):
        data = make_inputs(problem, problem.primary, s, 7, work)
        args = [torch.from_numpy(data[n]).reshape(shape) for n, _, shape in table.CACAO_INPUTS]
        with torch.no_grad():
            got = model(*args)
        got = got if isinstance(got, tuple) else (got,)
        assert [b.name for b in problem.validated] == [n for n, _, _ in table.CACAO_OUTPUTS]
        for (out, _, _), t in zip(table.CACAO_OUTPUTS, got, strict=True):
            ref = np.load(work / "reference" / "default" / f"set{s}" / f"{out}.npy")
            assert np.allclose(ref, t.numpy().ravel(), atol=1e-5, rtol=1e-5), (name, s, out)
        first = data[table.CACAO_INPUTS[0][0]]
        if name != "heavy_tail_loss":  # its logits are a file: the same in every set
            assert previous is None or not np.array_equal(previous, first)  # fresh inputs in each set
        previous = first


def test_a_module_refused_writes_nothing(torch, tmp_path: Path) -> None:
    done = cacao("import", str(FIXTURES / "no_init_inputs.py"), "--to", str(tmp_path / "p"), cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == (
        "refused no_init_inputs.py: not in KernelBench's form: no get_init_inputs() (a module defines "
        "class Model(nn.Module), get_inputs() and get_init_inputs())"
    )
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["import", "nowhere.py"], "cacao import: error: nowhere.py: no such file or folder"),
        (["import", "README.md"], "cacao import: error: README.md: not a Python file"),
        (["import", "m.py", "--level", "x"], "cacao import: error: argument --level: expected a level"),
        (["import", "m.py", "--timeout", "0"], "cacao import: error: argument --timeout: must be a positive number"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "README.md").write_text("x")
    (tmp_path / "m.py").write_text("x = 1\n")
    done = cacao(*args, cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(message) and len(done.stderr.splitlines()) == 1, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "m.py"]
