"""An imported problem runs unchanged: on the tuner's own evaluation (ktt.worker on a FAKE GPU,
with a "kernel" written in Python to the imported boundary) and in a whole run with a scripted
model and the FAKE tuner (tests/fake_tuner.py), as any other problem."""

from __future__ import annotations

import asyncio
import importlib.util
import shutil
from pathlib import Path

import numpy as np
import pytest

from cacao_tui.store.atomic import read_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import FinalResults
from ktt.candidates import launch_plan
from ktt.problem import load_problem
from ktt.spec import load_spec_text
from tests.engine.conftest import make_engine
from tests.engine.scenario import SPEC as SCENARIO_SPEC
from tests.engine.scenario import Scenario
from tests.fake_tuner import FakeTuner
from tests.kernelbench.conftest import IMPORTED
from tests.ktt.fake_launch_gpu import FakeGpu, fake_session

SPEC = """tune_params: {BLOCK: [256]}
launches:
  - {kernel: k, grid: {x: 1}, block: {x: BLOCK}}
"""


def _ref(problem_dir: Path):
    spec = importlib.util.spec_from_file_location(f"ref_{problem_dir.name}", problem_dir / "ref.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def conv_relu_bn_kernel(torch, swap: bool = False, stale: list | None = None):
    """A Python stand-in for a known-good kernel on the imported boundary (x, 7 weights, out):
    the convolution, ReLU and training-mode batch norm from the buffers, written into out."""

    def kernel(gpu: FakeGpu, grid, block, x, w, b, gw, gb, rm, rv, nbt, out) -> None:
        f = lambda ptr, n: torch.from_numpy(gpu.view(ptr, 4 * n, np.float32).copy())  # noqa: E731
        xx = f(x, 8 * 3 * 32 * 32).reshape(8, 3, 32, 32)
        weight, bias, gamma, beta = f(w, 16 * 27).reshape(16, 3, 3, 3), f(b, 16), f(gw, 16), f(gb, 16)
        if swap:
            gamma, beta = beta, gamma  # the weights taken in the wrong order
        y = torch.relu(torch.nn.functional.conv2d(xx, weight, bias))
        y = torch.nn.functional.batch_norm(y, None, None, gamma, beta, training=True, eps=1e-5)
        result = y.numpy().ravel()
        if stale is not None:  # remembers its first answer: right on the first input set only
            if not stale:
                stale.append(result.copy())
            result = stale[0]
        gpu.view(out, 4 * result.size, np.float32)[:] = result

    return kernel


@pytest.fixture(scope="module")
def conv(level) -> Path:
    problems, _ = level
    return problems / "level1_conv_relu_bn"


def _evaluate(problem_dir: Path, kernel, work: Path) -> dict:
    problem = load_problem(problem_dir)
    ref = _ref(problem_dir)

    def expected(inputs: dict) -> np.ndarray:
        return ref.cacao_reference(ref.prepare_input(dict(problem.primary.scalars), inputs))["out"].numpy()

    session = fake_session(problem, {"k": kernel}, work, {"out": expected})
    program, scratch = launch_plan(load_spec_text(SPEC, problem), {"BLOCK": 256}, problem.primary)
    return session.evaluate({"cubin_hex": "00", "launches": program, "scratch": scratch})


def test_a_kernel_on_the_imported_boundary_passes_all_five_input_sets(torch, conv: Path, tmp_path: Path) -> None:
    result = _evaluate(conv, conv_relu_bn_kernel(torch), tmp_path)
    assert result["status"] == "ok" and result["confirmed"], result.get("error")


def test_weights_in_the_wrong_order_or_a_remembered_answer_fail(torch, conv: Path, tmp_path: Path) -> None:
    swapped = _evaluate(conv, conv_relu_bn_kernel(torch, swap=True), tmp_path / "a")
    assert swapped["status"] == "validation_failed" and swapped["error"].startswith("out: ")
    stale = _evaluate(conv, conv_relu_bn_kernel(torch, stale=[]), tmp_path / "b")
    assert stale["status"] == "validation_failed"
    assert stale["error"].startswith("wrong on fresh input set 1 of 4: out: "), stale["error"]


@pytest.mark.parametrize("name", IMPORTED)
def test_an_imported_problem_replays_with_the_fake_tuner(level, tmp_path: Path, name: str) -> None:
    problems, _ = level
    run_dir = tmp_path / name
    shutil.copytree(problems / f"level1_{name}", run_dir)
    signature = load_problem(run_dir).boundary_signature()

    def author(branch: str, iteration: int, index: int) -> dict | None:
        if index != 0:
            return None
        body = f"volatile float step = {iteration}.0f; (void)step;"  # a new kernel each iteration
        source = f'// FAKE_TIME_MS: {4.0 / iteration}\nextern "C" __global__ void k({signature}) {{ {body} }}\n'
        return {"tool_calls": [
            {"id": "w1", "name": "write_file", "arguments": {"path": "kernels.cu", "content": source}},
            {"id": "w2", "name": "write_file", "arguments": {"path": "tuning.yaml", "content": SCENARIO_SPEC}},
        ]}  # fmt: skip

    scenario = Scenario(strategies=["one"], author_script=author)
    engine = make_engine(run_dir, scenario.provider(), tuner=FakeTuner(reference_ms=8.0), max_iter=2, n_strategies=1)
    finished = asyncio.run(engine.run())
    assert finished.status == "ok"
    final = read_model(RunLayout(run_dir).final_results, FinalResults)
    assert final.best is not None and final.best.time_ms == 2.0 and final.best.speedup == pytest.approx(4.0)
    # The model was told the boundary, that the weights are inputs, and KernelBench's tolerance,
    # and it read the module's own source as the reference.
    prompts = "\n".join(m.content for r in scenario.requests if r.key.node == "author" for m in r.messages
                        if isinstance(m.content, str))  # fmt: skip
    assert signature in prompts and "KernelBench's" in prompts and "5 input sets" in prompts
    assert "weights: inputs here" in prompts and "class Model(nn.Module):" in prompts
