"""The profile's metric families: tensor pipe, local memory (spills), branch uniformity, sectors per request.

``raw_mmul_h200_families.csv`` is the recorded mmul profile (raw_mmul_h200.csv) with the
new families' columns added in ncu's raw-page format (``--csv --page raw --print-units
base``): header, unit row, values. The added values are illustrative, not measured; the
column names are checked against the device's ``ncu --query-metrics`` (the excerpt file).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ktt.ncu import CATALOGUE, parse_raw_csv

DATA = Path(__file__).parent / "data" / "ncu"
QUERY = DATA / "query_metrics_h200_excerpt.txt"
FAMILIES = DATA / "raw_mmul_h200_families.csv"
# A real recording: the gpu test below on the H200 (2026-12-01, ncu 2025.3.1, bench/gemm_space's
# SGEMM at BLOCK 16x16, TILE 8x8x32, PAD 1), kept by KTT_GPU_TEST_OUT.
RECORDED = DATA / "raw_sgemm_h200_families.csv"
ROLLUPS = {"Counter": {"sum", "avg", "min", "max"}, "Throughput": {"avg", "min", "max", "sum"},
           "Ratio": {"ratio", "pct", "max_rate"}}  # fmt: skip
# Launch statistics and occupancy limits are attributes of the launch, not queried metrics.
ATTRIBUTES = ("launch__", "sm__maximum_warps_per_active_cycle_pct")


def query_list() -> dict[str, str]:
    out = {}
    for line in QUERY.read_text().splitlines():
        if line and not line.startswith("#"):
            name, kind = line.split()
            out[name] = kind
    return out


def test_every_catalogue_metric_exists_on_sm90_with_a_valid_rollup() -> None:
    known = query_list()
    for m in CATALOGUE:
        if m.name.startswith(ATTRIBUTES):
            continue
        base, _, rollup = m.name.partition(".")
        assert base in known, f"{m.name}: not in ncu 2025.3's metric list for sm_90"
        assert rollup.split(".")[0] in ROLLUPS[known[base]], f"{m.name}: no such rollup for a {known[base]}"


def test_the_new_families_parse_with_labels_sections_and_units() -> None:
    (k,) = parse_raw_csv(FAMILIES.read_text())
    by = {m.name: m for m in k.metrics}
    tensor = by["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"]
    assert (tensor.label, tensor.section, tensor.unit, tensor.value) == ("tensor pipe busy", "compute", "%", 0.0)
    spill = by["l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum"]
    assert (spill.section, spill.unit, spill.value) == ("local_memory", "bytes", 1048576.0)
    assert "spill" in spill.label
    assert by["smsp__inst_executed_op_local_st.sum"].unit == "warp instructions"
    uniform = by["smsp__sass_average_branch_targets_threads_uniform.pct"]
    assert (uniform.label, uniform.section, uniform.unit) == ("branch uniformity", "divergence", "%")
    assert uniform.value == 97.53
    threads = by["smsp__thread_inst_executed_per_inst_executed.ratio"]
    assert threads.unit == "threads of 32" and threads.value == 31.62
    sectors = by["l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio"]
    assert sectors.section == "memory" and sectors.unit.startswith("sectors") and sectors.value == 4.25
    stall = by["smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio"]
    assert stall.section == "warp_stalls" and stall.unit == "cycles per issued instruction"
    sections = {m.section for m in k.metrics}
    assert {"local_memory", "divergence", "compute", "memory"} <= sections
    # catalogue order, as before
    assert [m.name for m in k.metrics] == [m.name for m in CATALOGUE if m.name in by]


def test_a_real_h200_recording_has_every_new_family_as_a_number() -> None:
    (k,) = parse_raw_csv(RECORDED.read_text())
    by = {m.name: m for m in k.metrics}
    for name in (
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
        "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum",
        "smsp__inst_executed_op_local_st.sum",
        "smsp__sass_average_branch_targets_threads_uniform.pct",
        "smsp__thread_inst_executed_per_inst_executed.ratio",
        "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio",
    ):
        assert name in by and isinstance(by[name].value, float), name
    assert by["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"].value < 1.0  # an fp32 FMA GEMM
    assert 24 <= by["smsp__thread_inst_executed_per_inst_executed.ratio"].value <= 32


def test_the_propose_prompt_and_the_profile_tab_show_them() -> None:
    """Both render every metric as [section] label: value unit, so the new families reach the model and the UI."""
    from cacao_tui.ui.formatting import fmt_value

    (k,) = parse_raw_csv(FAMILIES.read_text())
    by = {m.name: m for m in k.metrics}
    m = by["l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum"]
    assert fmt_value(m.value, m.unit) == "1,048,576 bytes"
    m = by["l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio"]
    assert fmt_value(m.value, m.unit) == "4.25 sectors (4 = coalesced 4-byte loads)"


@pytest.mark.gpu
def test_ncu_on_the_gpu_reports_the_new_families(tmp_path: Path) -> None:
    """Profile one GEMM configuration with the catalogue: every new family comes back with a number."""
    import json
    import os
    import shutil
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    space = root / "bench" / "gemm_space"
    config = {"BLOCK_SIZE_X": 16, "BLOCK_SIZE_Y": 16, "TILE_SIZE_X": 8, "TILE_SIZE_Y": 8, "TILE_K": 32, "PAD": 1}
    argv = [sys.executable, "-m", "ktt", "profile", "--problem", str(space / "problem"), "--kernel",
            str(space / "sgemm.cu"), "--spec", str(space / "tuning.yaml"), "--config", json.dumps(config),
            "--output", str(tmp_path), "--json"]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=root)
    lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    report = lines[-1]
    if report.get("error_kind") in ("ncu_missing", "no_permission"):
        pytest.skip(f"ncu cannot profile here: {report.get('error')}")
    assert proc.returncode == 0, (report.get("error"), proc.stderr[-2000:])
    keep = os.environ.get("KTT_GPU_TEST_OUT")
    if keep:  # the recorded CSV for the CPU tests
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(tmp_path / "profile_raw.csv", Path(keep) / "ncu_raw_sgemm_families.csv")
    (k,) = report["kernels"]
    by = {m["name"]: m for m in k["metrics"]}
    for name in (
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
        "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum",
        "smsp__inst_executed_op_local_st.sum",
        "smsp__sass_average_branch_targets_threads_uniform.pct",
        "smsp__thread_inst_executed_per_inst_executed.ratio",
        "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio",
    ):
        assert name in by and isinstance(by[name]["value"], float), (name, by.get(name))
    assert by["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"]["value"] < 1.0  # fp32 FMA GEMM
    assert 24 <= by["smsp__thread_inst_executed_per_inst_executed.ratio"]["value"] <= 32


HOPPER_COLUMNS = (
    ("sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_active", "%", "71.2"),
    ("sm__inst_executed_pipe_tensor_op_gmma.sum", "inst", "524288"),
    ("sm__inst_executed_pipe_tensor_op_hmma.sum", "inst", "0"),
    ("smsp__inst_executed_op_tma_ld.sum", "inst", "65536"),
    ("smsp__inst_executed_op_tma_st.sum", "inst", "0"),
    ("smsp__average_warps_issue_stalled_gmma_per_issue_active.ratio", "", "3.5"),
)


def test_the_hopper_families_are_named_for_sm90_and_parse() -> None:
    """wgmma utilisation and TMA traffic (illustrative values in ncu's raw-page format)."""
    header = ['"ID"', '"Kernel Name"', *(f'"{n}"' for n, _, _ in HOPPER_COLUMNS)]
    units = ['""', '""', *(f'"{u}"' for _, u, _ in HOPPER_COLUMNS)]
    values = ['"0"', '"gemm_tma_wgmma"', *(f'"{v}"' for _, _, v in HOPPER_COLUMNS)]
    (k,) = parse_raw_csv("\n".join(",".join(row) for row in (header, units, values)))
    by = {m.name: m for m in k.metrics}
    busy = by[HOPPER_COLUMNS[0][0]]
    assert (busy.section, busy.unit, busy.value) == ("compute", "%", 71.2) and "wgmma" in busy.label
    gmma = by["sm__inst_executed_pipe_tensor_op_gmma.sum"]
    assert (gmma.label, gmma.unit, gmma.value) == ("wgmma instructions (sm_90)", "warp instructions", 524288.0)
    tma = by["smsp__inst_executed_op_tma_ld.sum"]
    assert (tma.section, tma.unit, tma.value) == ("memory", "instructions, one box each", 65536.0)
    assert "TMA" in tma.label and "sm_90" in tma.label
    stall = by["smsp__average_warps_issue_stalled_gmma_per_issue_active.ratio"]
    assert stall.section == "warp_stalls" and "wgmma" in stall.label
    hopper = [m for m in CATALOGUE if "sm_90" in m.label]
    assert {m.name for m in hopper} == {n for n, _, _ in HOPPER_COLUMNS} - {"sm__inst_executed_pipe_tensor_op_hmma.sum"}
