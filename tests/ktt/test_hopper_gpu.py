"""Hopper launches on a real device (``pytest -m gpu``; an sm_90 GPU, skipped elsewhere).

tests/ktt/data/hopper tunes through ``python -m ktt tune``: TMA loads and stores through
tensor maps that the worker encodes with cuTensorMapEncodeTiled, cluster launches through
cuLaunchKernelEx, compiled for sm_90a. Its hostile variants (the kernel's HOSTILE macro) are
classified and never best. The CPU side of the same paths is tests/ktt/test_hopper_launches.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_gpu_tuning import results, run_ktt, tune

from ktt.tensor_map import TensorMapGeometry
from ktt.toolkit import query_device

HOPPER = Path(__file__).parent / "data" / "hopper"
pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _needs_hopper() -> None:
    info = query_device(0)
    if info is None or int(info.arch[3:5]) < 90:
        pytest.skip("needs a GPU of compute capability 9.0 or newer")


def spec_with(tmp_path: Path, extra_params: str = "", replace: tuple[str, str] | None = None) -> Path:
    text = (HOPPER / "tuning.yaml").read_text()
    text = text.replace("SWIZZLE: [0, 128]", "SWIZZLE: [0, 128]" + extra_params)
    if replace is not None:
        text = text.replace(*replace)
    path = tmp_path / "tuning.yaml"
    path.write_text(text)
    return path


def run(tmp_path: Path, spec: Path, *extra: str):
    out = tmp_path / "out"
    ref = str(tmp_path / "ref.json")
    code, summary = tune(HOPPER, HOPPER / "kernels.cu", spec, out, "--duration", "0", "--reference-time", ref, *extra)
    return code, summary, results(out)


def test_the_hopper_problem_tunes_to_a_valid_best_with_tma_and_clusters(tmp_path: Path) -> None:
    code, summary, rows = run(tmp_path, HOPPER / "tuning.yaml")
    assert code == 0 and summary.ok and summary.arch == "sm_90a", summary.message
    assert summary.best is not None and summary.best.status == "ok" and summary.best.confirmed
    assert len(rows) == 27
    bad = [(r.config, r.status, r.error) for r in rows if r.status != "ok"]
    assert not bad, bad  # every tile, swizzle and cluster shape of the space is right
    assert {r.config["CLUSTER_X"] for r in rows if r.status == "ok"} == {1, 2, 4}
    assert {r.config["SWIZZLE"] for r in rows if r.status == "ok"} == {0, 128}
    assert summary.worker_restarts == 0


def test_a_tma_store_through_a_map_of_a_read_only_input_is_caught(tmp_path: Path) -> None:
    code, summary, rows = run(tmp_path, spec_with(tmp_path, "\n  HOSTILE: [1]"), "--max-configs", "6")
    assert code == 1 and summary.best is None
    assert rows and all(r.status == "validation_failed" for r in rows), [(r.status, r.error) for r in rows]
    assert all("input X was modified" in (r.error or "") for r in rows)


def test_a_cluster_the_kernel_cannot_take_is_launch_failed_and_the_search_goes_on(tmp_path: Path) -> None:
    """The kernel fixes 2-block clusters at compile time (HOSTILE 2); launches with 4 are refused."""
    spec = spec_with(tmp_path, "\n  HOSTILE: [2]", ("CLUSTER_X: [1, 2, 4]", "CLUSTER_X: [2, 4]"))
    code, summary, rows = run(tmp_path, spec)
    by_cluster: dict[int, set[str]] = {}
    for r in rows:
        by_cluster.setdefault(int(r.config["CLUSTER_X"]), set()).add(r.status)
    assert by_cluster[4] == {"launch_failed"}, [(r.config, r.error) for r in rows if r.config["CLUSTER_X"] == 4]
    assert by_cluster[2] == {"ok"}
    assert all("cluster" in (r.error or "") for r in rows if r.config["CLUSTER_X"] == 4)
    assert code == 0 and summary.best is not None and summary.best.config["CLUSTER_X"] == 2
    assert summary.worker_restarts == 0


def test_the_driver_encodes_every_map_ktt_accepts() -> None:
    from ktt.device import Gpu

    gpu = Gpu(0)
    ptr = gpu.alloc(1 << 20)
    try:
        for dtype, box0 in (("bfloat16", 64), ("float32", 32), ("float16", 64), ("uint8", 128), ("float64", 16)):
            for swizzle in ("none", "32B", "64B", "128B"):
                size = {"bfloat16": 2, "float32": 4, "float16": 2, "uint8": 1, "float64": 8}[dtype]
                span = {"none": 256, "32B": 32, "64B": 64, "128B": 128}[swizzle]
                inner = min(box0, span // size)
                g = TensorMapGeometry("A", dtype, (256, 64), (256 * size,), (inner, 8), swizzle, "256B", "none")
                assert len(gpu.encode_tensor_map(g, ptr)) == 128
    finally:
        gpu.free(ptr)


def test_ncu_counts_the_tma_traffic_of_a_cluster_launch(tmp_path: Path) -> None:
    """One TMA load and one TMA store per block: 32 x 10 blocks at TW = TH = 32 (W = 1000, H = 300).
    Issued by one thread; if the compiler predicates rather than branches, the other 3 warps count too."""
    config = '{"TW": 32, "TH": 32, "CLUSTER_X": 2, "SWIZZLE": 128}'
    code, lines = run_ktt("profile", "--problem", HOPPER, "--kernel", HOPPER / "kernels.cu", "--spec",
                          HOPPER / "tuning.yaml", "--config", config, "--output", tmp_path)  # fmt: skip
    report = lines[-1]
    if report.get("error_kind") in ("ncu_missing", "no_permission"):
        pytest.skip(f"ncu cannot profile here: {report.get('error')}")
    assert code == 0, report.get("error")
    (k,) = report["kernels"]
    by = {m["name"]: m["value"] for m in k["metrics"]}
    assert 320 <= by["smsp__inst_executed_op_tma_ld.sum"] <= 4 * 320
    assert 320 <= by["smsp__inst_executed_op_tma_st.sum"] <= 4 * 320
    assert by["sm__inst_executed_pipe_tensor_op_gmma.sum"] == 0  # no wgmma in this kernel
