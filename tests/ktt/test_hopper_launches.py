"""Hopper launches on the CPU: compile targets (sm_90 -> sm_90a), tensor-map arguments and clusters.

The spec's parsing and checks, the per-configuration evaluation, real NVRTC compiles for the
targets, the worker's packing and launch path on a FAKE GPU (tests/ktt/fake_launch_gpu.py), and
the real cuda-python calls up to the point where they need a driver. What runs on a GPU is in
test_hopper_gpu.py.
"""

from __future__ import annotations

import ctypes
import shutil
from pathlib import Path

import pytest
from fake_launch_gpu import FakeBuffers, FakeGpu, decode_map
from ktt_paths import DATA
from test_tune_orchestration import run as run_fake_tune

from ktt.buffers import alloc_guarded
from ktt.candidates import launch_plan
from ktt.check import check_files, check_kernel
from ktt.compile_cache import cache_key
from ktt.device import CudaError, KernelParams, cluster_launch_config, tensor_map_call_args
from ktt.expressions import ExpressionError
from ktt.nvrtc import CompileRequest
from ktt.problem import ProblemError, load_problem
from ktt.problem.model import Problem
from ktt.protocol import LogLine
from ktt.sequence import LaunchRejected, prepare
from ktt.spec import SpecError, load_spec_text
from ktt.tensor_map import L2_PROMOTION_BYTES, OOB_FILLS, SWIZZLE_BYTES, TMA_DTYPES, TensorMapGeometry
from ktt.toolkit import arch_specific, compile_target, normalize_arch, runs_on

TINY = DATA / "tiny"
HOPPER = DATA / "hopper"

WGMMA = 'extern "C" __global__ void scale(const float* X, float* Y) { asm volatile("wgmma.fence.sync.aligned;"); }\n'
PLAIN_SPEC = "launches:\n  - {kernel: scale, grid: {x: 8}, block: {x: 128}}\n"


def tiny() -> Problem:
    return load_problem(TINY)


def problem_with(tmp_path: Path, src: Path, gpu: str) -> Path:
    d = tmp_path / src.name
    shutil.copytree(src, d)
    text = (d / "problem.yaml").read_text()
    (d / "problem.yaml").write_text(f"gpu:\n{gpu}\n{text}")
    return d


def spec_error(text: str, problem: Problem | None = None) -> SpecError:
    with pytest.raises(SpecError) as info:
        load_spec_text(text, problem or tiny())
    return info.value


# -- targets -----------------------------------------------------------------------------------


def test_an_arch_with_an_arch_specific_variant_gets_it() -> None:
    assert [arch_specific(a) for a in ("sm_90", "sm_100", "sm_120", "sm_86", "sm_80", "sm_90a")] == [
        "sm_90a",
        "sm_100a",
        "sm_120a",
        "sm_86",
        "sm_80",
        "sm_90a",
    ]
    assert compile_target("sm_90", None, None)[0] == "sm_90a"
    assert compile_target("sm_90", "sm_90", "sm_90a") == ("sm_90", "tuning.yaml arch")
    assert compile_target("sm_90", None, "sm_90") == ("sm_90", "problem.yaml gpu.arch")
    assert normalize_arch("9.0a") == "sm_90a" and normalize_arch("compute_100f") == "sm_100f"
    with pytest.raises(ValueError):
        normalize_arch("sm_90z")


def test_which_cubins_run_on_which_gpu() -> None:
    assert runs_on("sm_90a", "sm_90") is None and runs_on("sm_90", "sm_90") is None
    assert runs_on("sm_80", "sm_86") is None and runs_on("sm_100f", "sm_103") is None
    assert "arch-specific" in (runs_on("sm_90a", "sm_100") or "")
    assert "does not run" in (runs_on("sm_80", "sm_90") or "")
    assert "does not run" in (runs_on("sm_89", "sm_86") or "")


def test_the_compile_check_builds_wgmma_for_sm90a_by_default_and_not_for_a_chosen_sm90() -> None:
    report = check_kernel(tiny(), WGMMA, PLAIN_SPEC, sample=1, arch="sm_90")
    assert report.ok, report.message
    assert report.arch == "sm_90a"
    chosen = check_kernel(tiny(), WGMMA, "arch: sm_90\n" + PLAIN_SPEC, sample=1, arch="sm_90")
    assert not chosen.ok and chosen.arch == "sm_90"
    assert "wgmma.fence" in (chosen.message or "") and "sm_90" in (chosen.message or "")


def test_gpu_arch_in_problem_yaml_chooses_the_target_and_tuning_yaml_wins(tmp_path: Path) -> None:
    d = problem_with(tmp_path, TINY, "  arch: sm_90")
    problem = load_problem(d)
    assert problem.arch == "sm_90"
    assert check_kernel(problem, WGMMA, PLAIN_SPEC, sample=1, arch="sm_90").arch == "sm_90"
    report = check_kernel(problem, WGMMA, "arch: sm_90a\n" + PLAIN_SPEC, sample=1, arch="sm_90")
    assert report.ok and report.arch == "sm_90a"


def test_a_bad_gpu_arch_names_the_field(tmp_path: Path) -> None:
    d = problem_with(tmp_path, TINY, "  arch: hopper")
    with pytest.raises(ProblemError) as info:
        load_problem(d)
    assert info.value.field == "gpu.arch" and "sm_90" in info.value.message


def test_a_target_that_cannot_run_on_the_gpu_is_refused_naming_the_field(tmp_path: Path) -> None:
    spec = tmp_path / "tuning.yaml"
    spec.write_text("arch: sm_80\n" + PLAIN_SPEC)
    report, code = check_files(TINY, TINY / "kernels.cu", spec, sample=1, arch="sm_90")
    assert code == 2 and report.message is not None
    assert report.message.startswith(f"{spec}: arch: ") and "sm_80" in report.message
    d = problem_with(tmp_path, TINY, "  arch: sm_100a")
    report, code = check_files(d, d / "kernels.cu", d / "tuning.yaml", sample=1, arch="sm_90")
    assert code == 2 and "gpu.arch" in (report.message or "") and "arch-specific" in (report.message or "")


def test_tensor_maps_and_clusters_need_sm90() -> None:
    text = "launches:\n  - {kernel: scale, grid: {x: 8}, block: {x: 128}, cluster: {x: 2}}\n"
    report = check_kernel(tiny(), "", text, arch="sm_86")
    assert not report.ok and "launches[0].cluster" in (report.message or "")
    assert "sm_90 or newer" in (report.message or "")
    text = "launches:\n  - {kernel: s, grid: {x: 8}, block: {x: 1}, args: [{tensor_map: X, dims: [N], box: [64]}]}\n"
    report = check_kernel(tiny(), "", text, arch="sm_86")
    assert not report.ok and "launches[0].args[0]" in (report.message or "")


def test_the_target_is_part_of_the_compile_key() -> None:
    req = CompileRequest("x", "/w/kernels.cu", "kernels.cu", "sm_90", (), ())
    other = CompileRequest("x", "/w/kernels.cu", "kernels.cu", "sm_90a", (), ())
    assert cache_key(req) != cache_key(other)


def test_the_tuner_compiles_for_the_arch_specific_variant(tmp_path: Path) -> None:
    """A fake GPU worker (arch sm_90): every configuration is compiled for sm_90a, the summary says so."""
    code, lines, summary, rows = run_fake_tune(
        tmp_path, (HOPPER / "tuning.yaml").read_text(), HOPPER, (HOPPER / "kernels.cu").read_text(), max_configs=3
    )
    assert summary is not None and code == 0 and summary.ok, summary and summary.message
    assert summary.arch == "sm_90a" and len(rows) == 3
    logs = [x.message for x in lines if isinstance(x, LogLine)]
    assert "compiling for sm_90a on a sm_90 GPU (the GPU's arch-specific variant)" in logs


# -- tensor-map arguments: the spec ------------------------------------------------------------

MAP_SPEC = """
tune_params: {B: [64, 128]}
launches:
  - kernel: k
    grid: {x: N / B}
    block: {x: 128}
    args: [ARG, Y]
"""


def map_spec(arg: str) -> str:
    return MAP_SPEC.replace("ARG", arg)


def test_a_tensor_map_argument_resolves_with_defaults() -> None:
    spec = load_spec_text(map_spec("{tensor_map: X, dims: [N], box: [B]}"), tiny())
    arg = spec.kernel_launches()[0].args[0]
    assert arg.kind == "tensor_map" and arg.name == "X" and arg.dtype == "float32"  # the buffer's float
    m = arg.tensor_map
    assert m is not None and (m.swizzle, m.l2_promotion, m.oob_fill, m.strides) == ("none", "none", "none", None)
    assert spec.kernel_launches()[0].names() == {"N", "B"}
    assert spec.uses_hopper_launches == "launches[0].args[0]"


def test_an_evaluated_map_is_what_the_worker_encodes() -> None:
    text = map_spec(
        "{tensor_map: X, dtype: uint32, dims: [32, N / 32], box: [32, B / 16], strides: [32],"
        " swizzle: 128B, l2_promotion: 256B}"
    )
    program, _ = launch_plan(load_spec_text(text, tiny()), {"B": 128}, tiny().primary)
    assert program[0]["args"][0] == {
        "kind": "tensor_map",
        "name": "X",
        "dtype": "uint32",
        "dims": [32, 32],
        "strides": [128],  # bytes, for the driver
        "box": [32, 8],
        "swizzle": "128B",
        "l2_promotion": "256B",
        "oob_fill": "none",
    }
    assert "cluster" not in program[0]  # a plain launch stays a plain node


@pytest.mark.parametrize(
    ("arg", "field", "fragment"),
    [
        ("{tensor_map: Z, dims: [N], box: [64]}", "args[0].tensor_map", "'Z' is unknown"),
        ("{tensor_map: N, dims: [N], box: [64]}", "args[0].tensor_map", "'N' is a scalar"),
        ("{tensor_map: X, dtype: float8, dims: [N], box: [64]}", "args[0].dtype", "unknown tensor-map dtype"),
        ("{tensor_map: X, dims: [], box: []}", "args[0].dims", "0 dimensions"),
        ("{tensor_map: X, dims: [2, 2, 2, 2, 2, 2], box: [4, 1, 1, 1, 1, 1]}", "args[0].dims", "6 dimensions"),
        ("{tensor_map: X, dims: [N], box: [64, 1]}", "args[0].box", "2 sides for 1 dims"),
        ("{tensor_map: X, dims: [32, 32], box: [32, 1], strides: []}", "args[0].strides", "give 1"),
        ("{tensor_map: X, dims: [N], box: [3]}", "args[0].box[0]", "multiple of 16 bytes"),
        ("{tensor_map: X, dims: [N], box: [512]}", "args[0].box[0]", "out of range 1..256"),
        ("{tensor_map: X, dims: [0], box: [64]}", "args[0].dims[0]", "out of range"),
        ("{tensor_map: X, dims: [N], box: [64], swizzle: 64B}", "args[0].box[0]", "wider than the swizzle span"),
        ("{tensor_map: X, dims: [N], box: [64], swizzle: 96}", "args[0].swizzle", "allowed are"),
        ("{tensor_map: X, dims: [N], box: [64], l2_promotion: 32B}", "args[0].l2_promotion", "allowed are"),
        ("{tensor_map: X, dims: [N], box: [64], oob_fill: zero}", "args[0].oob_fill", "'none' or 'nan'"),
        ("{tensor_map: X, dtype: int32, dims: [N], box: [64], oob_fill: nan}", "args[0].oob_fill", "floating-point"),
        ("{tensor_map: X, dims: [32, 32], box: [32, 1], strides: [6]}", "args[0].strides[0]", "multiples of 16"),
        ("{tensor_map: X, dims: [32, 32], box: [32, 1], strides: [16]}", "args[0].strides[0]", "rows would overlap"),
        ("{tensor_map: X, dims: [N, 2], box: [64, 1]}", "args[0].dims", "run past the buffer's end"),
        ("{tensor_map: X, dims: [N], box: [64], bogus: 1}", "args[0].bogus", "unknown key"),
        ("{tensor_map: X, dims: [true], box: [64]}", "args[0].dims", "expected a number"),
    ],
)
def test_a_bad_tensor_map_is_refused_naming_the_field(arg: str, field: str, fragment: str) -> None:
    err = spec_error(map_spec(arg))
    assert err.field == f"launches[0].{field}", err
    assert fragment in err.message, err


def test_a_map_that_fits_one_case_but_not_another_names_the_case(tmp_path: Path) -> None:
    d = tmp_path / "tiny"
    shutil.copytree(TINY, d)
    text = (d / "problem.yaml").read_text().replace("scalars: {N: 512}", "scalars: {N: 256}")
    (d / "problem.yaml").write_text(text)
    err = spec_error(map_spec("{tensor_map: X, dims: [512], box: [64]}"), load_problem(d))
    assert err.field == "launches[0].args[0].dims" and "(shape half)" in err.message


def test_a_map_that_overruns_for_some_configurations_fails_those() -> None:
    spec = load_spec_text(map_spec("{tensor_map: X, dims: [B * 8], box: [64]}"), tiny())
    launch_plan(spec, {"B": 128}, tiny().primary)  # 1024 elements: the whole buffer
    with pytest.raises(ExpressionError) as info:
        launch_plan(spec, {"B": 256}, tiny().primary)
    assert str(info.value).startswith("launches[0].args[0].dims: dims [2048] span 8,192 bytes")
    assert "'X' (1,024 elements of float) holds 4,096" in str(info.value)


def test_swizzle_and_l2_promotion_may_follow_a_tune_parameter() -> None:
    text = map_spec("{tensor_map: X, dims: [32, N / 32], box: [32, 8], swizzle: S, l2_promotion: S * 2}").replace(
        "{B: [64, 128]}", "{B: [64], S: [0, 64, 128, 48]}"
    )
    spec = load_spec_text(text, tiny())
    got = {}
    for s in (0, 64, 128, 48):
        try:
            arg = launch_plan(spec, {"B": 64, "S": s}, tiny().primary)[0][0]["args"][0]
            got[s] = (arg["swizzle"], arg["l2_promotion"])
        except ExpressionError as exc:
            got[s] = str(exc)
    assert got[0] == ("none", "none") and got[128] == ("128B", "256B")
    assert "wider than the swizzle span (64B)" in got[64]  # a 128-byte box row, a 64-byte span
    assert got[48].startswith("launches[0].args[0].swizzle: 48 bytes; allowed")


# -- clusters: the spec ------------------------------------------------------------------------

CLUSTER_SPEC = """
tune_params: {C: [1, 2, 3, 4]}
launches:
  - {kernel: k, grid: {x: 8, y: 2}, block: {x: 128}, cluster: CLUSTER}
"""


def test_a_cluster_launch_node_carries_its_shape() -> None:
    spec = load_spec_text(CLUSTER_SPEC.replace("CLUSTER", "{x: C, y: 2}"), tiny())
    node = launch_plan(spec, {"C": 4}, tiny().primary)[0][0]
    assert node["cluster"] == [4, 2, 1] and node["non_portable"] is False
    with pytest.raises(ExpressionError) as info:
        launch_plan(spec, {"C": 3}, tiny().primary)
    assert str(info.value) == "launches[0].grid.x: 8 blocks is not a multiple of cluster.x = 3"
    assert spec.uses_hopper_launches == "launches[0].cluster"


@pytest.mark.parametrize(
    ("cluster", "fragment"),
    [
        ("{x: 16}", "above the portable limit of 8; set non_portable: true"),
        ("{x: 4, y: 4}", "above the portable limit"),
        ("{x: 32, non_portable: true}", "no device allows more than 16"),
        ("{x: 0}", "has an axis below 1"),
    ],
)
def test_a_cluster_no_device_can_launch_is_refused(cluster: str, fragment: str) -> None:
    err = spec_error(CLUSTER_SPEC.replace("CLUSTER", cluster))
    assert err.field == "launches[0].cluster" and fragment in err.message


def test_a_non_portable_cluster_needs_the_flag_per_configuration() -> None:
    spec = load_spec_text(CLUSTER_SPEC.replace("CLUSTER", "{x: C * 4, y: 2}"), tiny())
    with pytest.raises(ExpressionError) as info:
        launch_plan(spec, {"C": 2}, tiny().primary)
    assert "launches[0].cluster: 16 blocks per cluster is above the portable limit" in str(info.value)
    spec = load_spec_text(CLUSTER_SPEC.replace("CLUSTER", "{x: C * 4, y: 2, non_portable: true}"), tiny())
    assert launch_plan(spec, {"C": 2}, tiny().primary)[0][0]["non_portable"] is True


def test_the_hopper_example_checks_with_nvrtc_for_sm90a() -> None:
    report, code = check_files(HOPPER, HOPPER / "kernels.cu", HOPPER / "tuning.yaml", sample=4, arch="sm_90")
    assert code == 0 and report.ok and report.arch == "sm_90a", report.message
    assert report.restricted_size == 27 and all(c.ok for c in report.configs)


# -- the worker's path on a FAKE GPU -----------------------------------------------------------


def fake_setup(text: str, config: dict | None = None, **gpu_kw: object):
    problem = tiny()
    program, scratch = launch_plan(load_spec_text(text, problem), config or {}, problem.primary)
    records: list = []
    gpu = FakeGpu({"k": lambda g, grid, block, *args: records.append(args), "j": lambda *a: None}, **gpu_kw)  # type: ignore[arg-type]
    bufs = FakeBuffers({b.name: alloc_guarded(gpu, problem.primary.bytes_of(b), b.name) for b in problem.buffers})
    return gpu, bufs, program, scratch, records


def encodes(gpu: FakeGpu) -> list:
    return [x for x in gpu.log if isinstance(x, tuple) and x[0] == "encode"]


def test_a_tensor_map_is_encoded_for_the_bound_address_once_per_address() -> None:
    text = """
scratch: [{name: t, size: N}]
launches:
  - repeat:
      count: 4
      swap: [Y, t]
      body: [{kernel: k, grid: {x: 1}, block: {x: 1}, args: [{tensor_map: Y, dims: [32, N / 32], box: [32, 4]}, X]}]
"""
    gpu, bufs, program, scratch, records = fake_setup(text)
    seq = prepare(gpu, bufs, b"fake", program, scratch)
    y, t = seq.home["Y"], seq.home["t"]
    assert [e[1] for e in encodes(gpu)] == [y]  # at prepare, for the declared binding
    seq.run(None)
    seq.run(None)
    # passes alternate Y's and t's memory; each address was encoded once, over two runs of four passes
    assert [decode_map(r[0])[0] for r in records] == [y, t, y, t] * 2
    assert [e[1] for e in encodes(gpu)] == [y, t]
    assert decode_map(records[0][0])[1] == (32, 32) and records[0][1] == seq.home["X"]
    # a buffer re-allocated between runs (ShapeBuffers.dev holds the new one) gets a map of its own
    bufs.dev["Y"] = alloc_guarded(gpu, 4096, "Y")
    moved = bufs.dev["Y"].ptr
    seq.run(None)
    assert [decode_map(r[0])[0] for r in records[8:]] == [moved, t, moved, t]
    assert [e[1] for e in encodes(gpu)] == [y, t, moved] and seq.home["Y"] == moved


def test_plain_launches_encode_nothing_and_take_the_plain_launch() -> None:
    gpu, bufs, program, scratch, _ = fake_setup("launches:\n  - {kernel: k, grid: {x: 2}, block: {x: 1}, args: [X]}\n")
    seq = prepare(gpu, bufs, b"fake", program, scratch)
    seq.run(None)
    assert not encodes(gpu) and seq.launches[0].config is None and seq.launches[0].encode is None
    assert gpu.launches()[0].cluster is None
    old = seq.home["X"]
    bufs.dev["X"] = alloc_guarded(gpu, 4096, "X")  # re-allocated between runs: the next run binds it
    seq.run(None)
    assert [r.args[0] for r in gpu.launches()] == [old, bufs.dev["X"].ptr] and not encodes(gpu)


def test_a_refused_encode_fails_the_configuration_naming_the_argument() -> None:
    gpu, bufs, program, scratch, _ = fake_setup(
        "launches:\n  - {kernel: k, grid: {x: 1}, block: {x: 1}, args: [X, {tensor_map: Y, dims: [N], box: [64]}]}\n"
    )

    def refuse(geometry: TensorMapGeometry, address: int) -> bytes:
        raise CudaError("CUDA_ERROR_INVALID_VALUE", "cuTensorMapEncodeTiled")

    gpu.encode_tensor_map = refuse  # type: ignore[method-assign]
    with pytest.raises(LaunchRejected) as info:
        prepare(gpu, bufs, b"fake", program, scratch)
    assert "launches[0].args[1]: cuTensorMapEncodeTiled refused the map: CUDA_ERROR_INVALID_VALUE" in str(info.value)


CLUSTER_RUN = "launches:\n  - {kernel: k, grid: {x: 4, y: 2}, block: {x: 64}, cluster: {x: 2, y: 2}, args: [X]}\n"


def test_a_cluster_launch_goes_through_launch_ex_with_its_shape() -> None:
    gpu, bufs, program, scratch, _ = fake_setup(CLUSTER_RUN)
    seq = prepare(gpu, bufs, b"fake", program, scratch)
    seq.run(None)
    seq.run(None)
    assert [r.cluster for r in gpu.launches()] == [(2, 2, 1)] * 2
    assert seq.launches[0].config == ("config", (4, 2, 1), (64, 1, 1), 0, "main", (2, 2, 1))
    assert gpu.non_portable == []


def test_a_cluster_the_device_cannot_hold_is_launch_failed_with_the_reason() -> None:
    gpu, bufs, program, scratch, _ = fake_setup(CLUSTER_RUN, clusters_fit=0)
    with pytest.raises(LaunchRejected) as info:
        prepare(gpu, bufs, b"fake", program, scratch)
    assert "launches[0] (k): not one cluster of 2x2x1 blocks fits this device (64 threads" in str(info.value)
    gpu, bufs, program, scratch, _ = fake_setup(CLUSTER_RUN, cluster_launch=False)
    with pytest.raises(LaunchRejected, match="cannot launch thread-block clusters"):
        prepare(gpu, bufs, b"fake", program, scratch)


def test_a_launch_refused_by_the_driver_is_a_launch_limit_naming_the_launch() -> None:
    gpu, bufs, program, scratch, _ = fake_setup(CLUSTER_RUN)
    seq = prepare(gpu, bufs, b"fake", program, scratch)

    def refuse(config: object, func: object, params: object) -> None:
        raise CudaError("CUDA_ERROR_INVALID_CLUSTER_SIZE", "cuLaunchKernelEx")

    gpu.launch_ex = refuse  # type: ignore[method-assign]
    with pytest.raises(CudaError) as info:
        seq.run(None)
    assert info.value.launch_limit and not info.value.sticky  # the worker reports launch_failed and goes on
    assert str(info.value) == "launches[0] (k): cluster launch refused: CUDA_ERROR_INVALID_CLUSTER_SIZE"


def test_non_portable_clusters_are_allowed_once_per_kernel() -> None:
    text = (
        "launches:\n"
        "  - {kernel: k, grid: {x: 16}, block: {x: 32}, cluster: {x: 16, non_portable: true}, args: [X]}\n"
        "  - {kernel: k, grid: {x: 32}, block: {x: 32}, cluster: {x: 16, non_portable: true}, args: [X]}\n"
        "  - {kernel: j, grid: {x: 32}, block: {x: 32}, cluster: {x: 8}, args: [X]}\n"
    )
    gpu, bufs, program, scratch, _ = fake_setup(text)
    prepare(gpu, bufs, b"fake", program, scratch)
    assert gpu.non_portable == ["k"]


def test_a_tensor_map_is_passed_by_value_64_byte_aligned() -> None:
    data = bytes(range(128))
    params = KernelParams([("ptr", 0x1000), ("tmap", data), ("int", 7)])
    pointers = (ctypes.c_void_p * 3).from_address(params.address)
    assert pointers[1] % 64 == 0
    assert ctypes.string_at(pointers[1], 128) == data
    assert ctypes.c_uint64.from_address(pointers[0]).value == 0x1000
    assert ctypes.c_int32.from_address(pointers[2]).value == 7


# -- the real cuda-python calls, as far as they go without a driver ----------------------------


def _no_driver() -> bool:
    from ktt.toolkit import gpu_count

    return gpu_count() == 0


def test_every_spec_option_maps_to_a_driver_enum() -> None:
    for dtype in TMA_DTYPES:
        for swizzle in SWIZZLE_BYTES:
            for l2 in L2_PROMOTION_BYTES:
                for oob in OOB_FILLS:
                    g = TensorMapGeometry("X", dtype, (64, 4), (1024,), (16, 4), swizzle, l2, oob)
                    args = tensor_map_call_args(g, 0x10000)
                    assert len(args) == 11 and args[1] == 2


@pytest.mark.skipif(not _no_driver(), reason="with a driver the GPU tests cover the real calls")
def test_the_encode_and_launch_calls_take_their_arguments_up_to_the_driver() -> None:
    """cuda-python converts every argument before it loads libcuda: a type mistake would be a TypeError here."""
    from cuda.bindings import driver as cu

    g = TensorMapGeometry("X", "bfloat16", (4096, 4096), (8192,), (64, 128), "128B", "256B", "none")
    with pytest.raises(Exception) as info:
        cu.cuTensorMapEncodeTiled(*tensor_map_call_args(g, 0x7F0000000000))
    assert not isinstance(info.value, TypeError), info.value
    assert "cuda" in str(info.value).lower()  # the driver library is missing, nothing else
    config = cluster_launch_config((8, 4, 1), (128, 1, 1), 100_000, cu.CUstream(0), (2, 1, 1))
    assert (config.gridDimX, config.gridDimY, config.blockDimX, config.sharedMemBytes) == (8, 4, 128, 100_000)
    assert config.numAttrs == 1 and config.attrs[0].value.clusterDim.x == 2
    assert config.attrs[0].id == cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    params = KernelParams([("ptr", 0), ("tmap", bytes(128))])
    with pytest.raises(Exception) as info:
        cu.cuLaunchKernelEx(config, cu.CUfunction(), params.address, 0)
    assert not isinstance(info.value, TypeError), info.value
    with pytest.raises(Exception) as info:
        cu.cuOccupancyMaxActiveClusters(cu.CUfunction(), config)
    assert not isinstance(info.value, TypeError), info.value


def test_maps_and_clusters_in_a_launch_program_follow_each_pass() -> None:
    """A repeat body's tensor map, cluster shape and bindings are those of each pass."""
    text = """
scratch: [{name: t, size: N}]
launches:
  - repeat:
      var: p
      count: 3
      swap: [Y, t]
      body:
        - {kernel: k, grid: {x: 8}, block: {x: 32}, cluster: {x: "1 << p"},
           args: [{tensor_map: t, dims: ["N >> p"], box: [64]}, Y]}
"""
    gpu, bufs, program, scratch, _ = fake_setup(text)
    bodies = program[0]["repeat"]["bodies"]
    assert [body[0]["args"][0]["dims"] for body in bodies] == [[1024], [512], [256]]
    assert [body[0]["cluster"] for body in bodies] == [[1, 1, 1], [2, 1, 1], [4, 1, 1]]
    seq = prepare(gpu, bufs, b"fake", program, scratch)
    seq.run(None)
    records = gpu.launches()
    assert [r.cluster for r in records] == [(1, 1, 1), (2, 1, 1), (4, 1, 1)]
    y, t = seq.home["Y"], seq.home["t"]
    # the swaps rebind the names: the map of t follows t's binding, pass by pass
    assert [(decode_map(r.args[0]), r.args[1]) for r in records] == [
        ((t, (1024,)), y),
        ((y, (512,)), t),
        ((t, (256,)), y),
    ]
