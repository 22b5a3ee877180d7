"""The tuning.yaml prompt (cacao_tui/prompts/tuning_spec.txt, with the multi-pass and Hopper syntax
in the note sets prompts/notes/multipass.txt and hopper_tma.txt) teaches what ktt's parser accepts.

Each YAML block of the prompt is loaded by ``ktt.spec`` against the tiny test problem
(buffers X, Y of N floats), with the tune parameters the block leaves to the model; the
launch-program rules the prompt states (``until`` needs ``max_passes``, a read-only input
cannot be swapped) are checked against the parser too.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from ktt_paths import DATA

from cacao_tui import prompts
from ktt.candidates import launch_plan
from ktt.check import check_kernel
from ktt.expressions import ExpressionError
from ktt.problem import load_problem
from ktt.spec import Repeat, SpecError, load_spec_text

FENCE = re.compile(r"^```yaml\n(.*?)^```", re.MULTILINE | re.DOTALL)
PARAMS = {"BLOCK_X": [32, 64], "TILE": [1, 2], "STEPS": [4, 8]}


GUIDE = ("tuning_spec", "notes/multipass", "notes/hopper_tma")  # the guide and its note sets


def guide_text() -> str:
    return "\n".join(prompts.load(name) for name in GUIDE)


def blocks() -> list[dict]:
    return [yaml.safe_load(b) for b in FENCE.findall(guide_text())]


def load(doc: dict):  # type: ignore[no-untyped-def]
    doc = {"tune_params": {k: v for k, v in PARAMS.items() if k != "TILE"}, **doc}
    return load_spec_text(yaml.safe_dump(doc, sort_keys=False), load_problem(DATA / "tiny"))


def program() -> dict:
    found = [b for b in blocks() if any("repeat" in item for item in b.get("launches", []))]
    assert len(found) == 1, "the prompt shows one launch-program example"
    return found[0]


def test_the_basic_example_loads() -> None:
    doc = blocks()[0]  # its grid reads a scalar M the tiny problem lacks: stood in for by a parameter
    assert load({**doc, "tune_params": {**doc["tune_params"], "M": [64]}}).launches


def test_the_launch_program_example_loads() -> None:
    spec = load(program())
    loop = spec.launches[0]
    assert isinstance(loop, Repeat)
    assert (loop.var, loop.swaps, loop.until) == ("it", (("Y", "Y_tmp"),), None)
    assert loop.count is not None and loop.count.text == "STEPS"


def test_the_until_form_the_prompt_describes_loads_and_needs_max_passes() -> None:
    doc = program()
    loop = doc["launches"][0]["repeat"]
    del loop["count"]
    loop["until"] = "done"
    loop["body"][0]["args"].append("done")
    with pytest.raises(SpecError, match="max_passes"):
        load(doc)
    loop["max_passes"] = 20
    spec = load(doc)
    assert isinstance(spec.launches[0], Repeat) and spec.launches[0].until == "done"


def test_a_read_only_input_cannot_be_swapped_as_the_prompt_says() -> None:
    doc = program()
    doc["scratch"][0]["name"] = "X_tmp"
    doc["launches"][0]["repeat"]["swap"] = ["X", "X_tmp"]
    with pytest.raises(SpecError):
        load(doc)


# -- the Hopper part: tensor maps and clusters -------------------------------------------------

GEMM_INPUTS = """args:
  - {kind: scalar, name: M, value: 512}
  - {kind: scalar, name: N, value: 1024}
  - {kind: scalar, name: K, value: 256}
  - {kind: buffer, name: A, dtype: int, size: M * K / 2, access: read}   # bf16 pairs
  - {kind: buffer, name: B, dtype: int, size: N * K / 2, access: read}
  - {kind: buffer, name: C, dtype: float, size: M * N, access: write, validate: true}
"""


def hopper_block() -> dict:
    found = [b for b in blocks() if "cluster" in b["launches"][0]]
    assert len(found) == 1, "the prompt shows one Hopper example"
    return found[0]


def gemm_problem(tmp_path: Path):  # type: ignore[no-untyped-def]
    d = tmp_path / "gemm"
    d.mkdir(parents=True)
    (d / "problem.yaml").write_text(
        "name: gemm\ngrid: {x: M * N / 256}\nreference: {type: cuda, file: ref.cu, function: r, block: {x: 256}}\n"
    )
    (d / "inputs.yaml").write_text(GEMM_INPUTS)
    (d / "ref.cu").write_text('extern "C" __global__ void r(const int* A, const int* B, float* C) {}\n')
    return load_problem(d)


def load_hopper(tmp_path: Path, doc: dict):  # type: ignore[no-untyped-def]
    problem = gemm_problem(tmp_path)
    return load_spec_text(yaml.safe_dump(doc, sort_keys=False), problem), problem


def test_the_hopper_example_loads_with_tensor_maps_and_a_cluster(tmp_path: Path) -> None:
    spec, problem = load_hopper(tmp_path, hopper_block())
    launch = spec.kernel_launches()[0]
    assert launch.cluster is not None
    maps = [a for a in launch.args if a.kind == "tensor_map"]
    assert [(m.name, m.dtype) for m in maps] == [("A", "bfloat16"), ("B", "bfloat16")]
    config = {"BM": 128, "BN": 128, "BK": 64, "STAGES": 3, "CLUSTER": 2, "SWIZZLE": 128}
    node = launch_plan(spec, config, problem.primary)[0][0]
    assert node["cluster"] == [2, 1, 1]
    assert node["args"][0]["dims"] == [256, 512] and node["args"][0]["swizzle"] == "128B"  # [K, M]: K first


def test_the_hopper_rules_the_prompt_states_hold(tmp_path: Path) -> None:
    text = prompts.load("notes/hopper_tma")
    assert "INNERMOST (contiguous) DIMENSION FIRST" in text and "sm_90a" in text
    doc = hopper_block()
    args = doc["launches"][0]["args"]
    # "a map larger than its buffer is refused, OOB fill or not"
    big = {**doc, "launches": [{**doc["launches"][0], "args": [{**args[0], "dims": ["K", "2 * M"]}, *args[1:]]}]}
    with pytest.raises(SpecError, match="run past the buffer's end"):
        load_hopper(tmp_path / "a", big)
    # "more than 8 blocks per cluster needs non_portable: true (at most 16)"
    wide = {**doc, "launches": [{**doc["launches"][0], "cluster": {"x": 16}}]}
    with pytest.raises(SpecError, match="non_portable: true"):
        load_hopper(tmp_path / "b", wide)
    wide["launches"][0]["cluster"] = {"x": 16, "non_portable": True}
    load_hopper(tmp_path / "c", wide)
    # "box[0] x element size ... at most the swizzle span"
    narrow = {**doc, "launches": [{**doc["launches"][0], "args": [{**args[0], "swizzle": "64B"}, *args[1:]]}]}
    spec, problem = load_hopper(tmp_path / "d", narrow)
    config = {"BM": 128, "BN": 128, "BK": 64, "STAGES": 3, "CLUSTER": 1, "SWIZZLE": 128}
    with pytest.raises(ExpressionError, match="wider than the swizzle span"):
        launch_plan(spec, config, problem.primary)


def test_the_tensor_map_declaration_the_prompts_give_compiles_for_sm90a() -> None:
    """The struct the Hopper notes tell the model to declare (twice: with the tuning.yaml syntax and
    in the kernel notes) works as a __grid_constant__ parameter."""
    text = prompts.load("notes/hopper_tma")
    decls = {
        " ".join(d.split())
        for d in re.findall(r"`(struct alignas\(64\) CUtensorMap_st \{.*?CUtensorMap;)`", text, re.S)
    }
    assert len(decls) == 1
    (declaration,) = decls
    source = (
        f"#include <cuda/barrier>\n{declaration}\n"
        'extern "C" __global__ void k(const __grid_constant__ CUtensorMap m, float* out) {\n'
        '    asm volatile("wgmma.fence.sync.aligned;");\n'
        "    out[0] = (float)(unsigned long long)&m;\n}\n"
    )
    report = check_kernel(
        load_problem(DATA / "tiny"),
        source,
        "launches:\n  - {kernel: k, grid: {x: 1}, block: {x: 128}, args: [X]}\n",
        sample=1,
        arch="sm_90",
    )
    assert report.ok and report.arch == "sm_90a", report.message


def test_the_tuning_spec_guides_hopper_example_loads(tmp_path: Path) -> None:
    """docs/TUNING_SPEC.md's tensor-map and cluster example is what the parser takes."""
    guide = (Path(__file__).resolve().parents[2] / "docs" / "TUNING_SPEC.md").read_text(encoding="utf-8")
    (doc,) = [yaml.safe_load(b) for b in FENCE.findall(guide) if "tensor_map:" in b and "kernel:" in b]
    params = {"BM": [128], "BN": [128], "BK": [64], "STAGES": [4], "CLUSTER_M": [2]}
    spec, problem = load_hopper(tmp_path, {"tune_params": params, **doc})
    node = launch_plan(spec, {k: v[0] for k, v in params.items()}, problem.primary)[0][0]
    assert node["cluster"] == [2, 1, 1] and node["args"][1]["box"] == [64, 128]
    assert node["args"][0]["l2_promotion"] == "256B" and node["smem"] == 4 * 256 * 64 * 2 + 1024
