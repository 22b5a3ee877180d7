"""On a GPU (issue 21): ``ktt device`` measures the device table, ``ktt validate`` finds a wrong
store with its mismatch samples and passes the fixed kernel, and ``ktt profile`` gives a
diagnosis with Nsight Compute's rule findings and kernels.cu source hotspots (-lineinfo)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ktt.protocol import DeviceReport, ProfileReport, ValidateReport

ROOT = Path(__file__).resolve().parents[2]
MMUL = ROOT / "problems" / "mmul"
DEMO = MMUL / "demo"
GOOD_STORE = "if (r1 < DIM_M && c1 < DIM_N) C[(size_t)r1 * DIM_N + c1] = acc11;"
BAD_STORE = "if (r1 < DIM_M && c1 < DIM_N) C[(size_t)r1 * DIM_N + c0] = acc11;"
pytestmark = pytest.mark.gpu


def ktt(*args: str | Path, timeout: float = 600) -> tuple[int, dict]:
    done = subprocess.run([sys.executable, "-m", "ktt", *map(str, args), "--json"], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)  # fmt: skip
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    assert lines, done.stderr[-3000:]
    return done.returncode, json.loads(lines[-1])


def test_the_device_table_is_measured() -> None:
    code, data = ktt("device", "--device", "0", timeout=120)
    assert code == 0, data
    d = DeviceReport.model_validate(data)
    assert d.sm_count > 0 and d.regs_per_sm > 0 and d.smem_per_sm >= d.smem_per_block > 0
    assert d.copy_bandwidth_gbs is not None and d.copy_bandwidth_gbs > 100
    assert d.peak("fp32") and d.peak("fp32") > 1  # TFLOP/s


def test_validate_finds_a_wrong_store_and_passes_its_fix(tmp_path: Path) -> None:
    good = (DEMO / "7_quad.cu").read_text()
    bad = tmp_path / "bad.cu"
    bad.write_text(good.replace(GOOD_STORE, BAD_STORE))
    spec = DEMO / "7_quad.yaml"
    code, data = ktt("validate", "--problem", MMUL, "--kernel", bad, "--spec", spec, "--output", tmp_path / "v1")
    report = ValidateReport.model_validate(data)
    assert code == 1 and not report.ok, data
    v = report.shapes[0].validation
    assert v is not None and v.bad_count > 0 and v.checked > v.bad_count and v.samples
    assert all(m.index >= (v.first_bad_index or 0) for m in v.samples)
    code, data = ktt("validate", "--problem", MMUL, "--kernel", DEMO / "7_quad.cu", "--spec", spec,
                     "--output", tmp_path / "v2")  # fmt: skip
    report = ValidateReport.model_validate(data)
    assert code == 0 and report.ok and report.shapes[0].confirmed, data


def test_the_profile_is_a_diagnosis_with_findings_and_source_lines(tmp_path: Path) -> None:
    code, data = ktt("profile", "--problem", MMUL, "--kernel", DEMO / "2_tiled.cu", "--spec", DEMO / "2_tiled.yaml",
                     "--output", tmp_path / "p", "--config", '{"TILE": 16, "PAD": 0}')  # fmt: skip
    report = ProfileReport.model_validate(data)
    if report.error_kind in ("ncu_missing", "no_permission"):
        pytest.skip(f"Nsight Compute unusable here: {report.error}")
    assert code == 0 and report.ok, data
    k = report.kernels[0]
    assert k.diagnosis is not None and k.diagnosis.bottlenecks and k.diagnosis.stalls
    assert k.diagnosis.occupancy_limiter is not None
    assert k.findings, "no rule findings were read from the details page"
    assert k.hotspots and all(h.file == "2_tiled.cu" and h.line > 0 for h in k.hotspots), k.hotspots
