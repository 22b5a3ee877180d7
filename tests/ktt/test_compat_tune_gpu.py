"""GPU: problem directories in the original CACAO's format tune to a valid best over the right denominator.

Each problem of the compatibility corpus (tests/compat/problems, one per reference type and
format feature) is tuned with ``python -m ktt tune`` and a known-good kernel written for it
(tests/ktt/compat_gpu/<problem>/). The tests assert what a user of the original would check:
the reference was built, every case has its own valid best, and the speedup's denominator is
the right one, with its source (a seed kept as seeded, the rest measured, and how).
Problems are copied to a temporary directory first: tuning fills in reference_time.json.
Set KTT_GPU_TEST_OUT to a directory to keep every summary there.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ktt.protocol import TuneSummary

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "compat" / "problems"
KERNELS = Path(__file__).parent / "compat_gpu"
pytestmark = pytest.mark.gpu


def tune(tmp_path: Path, name: str, *extra: str, source: Path = CORPUS) -> tuple[int, TuneSummary, Path]:
    problem = tmp_path / name
    shutil.copytree(source / name, problem)
    out = tmp_path / f"{name}-out"
    argv = [sys.executable, "-m", "ktt", "tune", "--problem", problem, "--kernel", KERNELS / name / "kernels.cu",
            "--spec", KERNELS / name / "tuning.yaml", "--output", out, "--json", *extra]  # fmt: skip
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=600, cwd=ROOT)
    lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines and lines[-1]["type"] == "result", proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = TuneSummary.model_validate(lines[-1])
    keep = os.environ.get("KTT_GPU_TEST_OUT")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(out / "summary.json", Path(keep) / f"compat_{name}.json")
    return proc.returncode, summary, problem


def reference_file(problem: Path) -> dict:
    return json.loads((problem / "output" / "reference_time.json").read_text())


def assert_valid(code: int, summary: TuneSummary) -> None:
    assert code == 0, summary.message
    assert summary.ok and summary.best is not None and summary.best.confirmed
    assert summary.score is not None and summary.score > 0
    for case in summary.cases:
        assert case.status == "ok" and case.time_ms and case.speedup, case
        assert case.reference_ms is not None and case.reference_ms > 0, case


def test_cuda_reference_in_the_older_inline_form(tmp_path: Path) -> None:
    code, summary, problem = tune(tmp_path, "legacy_inline", "--duration", "4")
    assert_valid(code, summary)
    (case,) = summary.cases
    assert case.reference_source == "measured" and case.reference_method.startswith("CUDA events")
    assert reference_file(problem)["reference_time_us"] == pytest.approx(case.reference_ms * 1e3)


def test_cuda_reference_with_file_data_cases_and_a_microsecond_seed(tmp_path: Path) -> None:
    """skewed is seeded (3.5 µs); wide is not named in reference_time.json, so it is measured and recorded."""
    code, summary, problem = tune(tmp_path, "spmv_files", "--duration", "4")
    assert_valid(code, summary)
    skewed, wide = summary.cases
    assert (skewed.name, wide.name) == ("skewed", "wide")
    assert skewed.reference_ms == pytest.approx(0.0035) and skewed.reference_source == "seeded"
    assert wide.reference_source == "measured"
    assert summary.score == pytest.approx((skewed.speedup * wide.speedup) ** 0.5)
    data = reference_file(problem)
    assert data["reference_time_us"] == 3.5 and data["cases"]["skewed"] == 3.5  # the seed, untouched
    assert data["cases"]["wide"] == pytest.approx(wide.reference_ms * 1e3)
    assert data["provenance"]["cases"]["wide"]["source"] == "measured"
    for case in summary.cases:
        assert (problem.parent / "spmv_files-out" / f"case_{case.name}" / "summary.json").exists()


def test_cpu_c_reference_with_a_custom_initialiser_and_per_case_budgets(tmp_path: Path) -> None:
    code, summary, _ = tune(tmp_path, "terrain_custom")
    assert_valid(code, summary)
    assert [(c.name, c.budget_s) for c in summary.cases] == [("square", 8.0), ("strip", 3.0)]
    assert all(c.reference_source == "measured" and c.reference_method == "wall clock around the call"
               for c in summary.cases)  # fmt: skip


def test_python_reference_serving_two_buffers_through_target(tmp_path: Path) -> None:
    code, summary, _ = tune(tmp_path, "minmax_multi_py", "--duration", "4")
    assert_valid(code, summary)
    assert summary.cases[0].reference_method == "wall clock around the call" and not summary.warnings


def test_python_reference_without_a_function_name(tmp_path: Path) -> None:
    code, summary, _ = tune(tmp_path, "softmax_rows_py", "--duration", "4")
    assert_valid(code, summary)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_torch_reference_is_timed_with_cuda_events(tmp_path: Path) -> None:
    code, summary, problem = tune(tmp_path, "scale_torch", "--duration", "4", source=KERNELS / "problems")
    assert_valid(code, summary)
    (case,) = summary.cases
    assert case.reference_method.startswith("CUDA events around the reference call (torch)"), case
    assert not summary.warnings
    prov = reference_file(problem)["provenance"]["reference_time_us"]
    assert prov["source"] == "measured" and prov["method"] == case.reference_method


def test_a_kernel_that_accumulates_into_a_zeroed_output_tunes_to_a_valid_best(tmp_path: Path) -> None:
    """The original hands every buffer over with its init data; TOTAL is zeros and the kernel (and the
    reference) atomicAdd into it. Under poisoned outputs this was 4/4 validation_failed on the H200."""
    code, summary, problem = tune(tmp_path, "accumulate_zeroed", "--duration", "4")
    assert_valid(code, summary)
    assert summary.valid == summary.evaluated  # every configuration is right, not only the best
    (case,) = summary.cases
    assert case.reference_source == "measured" and case.speedup and case.speedup > 0
    # the opt-in: poisoned outputs make the same kernel wrong everywhere
    yaml_path = problem / "problem.yaml"
    yaml_path.write_text(yaml_path.read_text().replace("  tolerance: 0\n", "  tolerance: 0\n  poison_outputs: true\n"))
    shutil.rmtree(problem / "output", ignore_errors=True)
    out = tmp_path / "poisoned-out"
    argv = [sys.executable, "-m", "ktt", "tune", "--problem", problem, "--kernel", KERNELS / "accumulate_zeroed" /
            "kernels.cu", "--spec", KERNELS / "accumulate_zeroed" / "tuning.yaml", "--output", out, "--json",
            "--duration", "2"]  # fmt: skip
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=600, cwd=ROOT)
    poisoned = TuneSummary.model_validate_json((out / "summary.json").read_text())
    assert proc.returncode == 1 and poisoned.best is None and poisoned.valid == 0
    assert set(poisoned.by_status) == {"validation_failed"}


def test_a_null_seed_stays_null_and_leaves_the_score_null(tmp_path: Path) -> None:
    """output/reference_time.json seeds 'big' (850 µs) and says null for 'small': no baseline."""
    before = (CORPUS / "null_seeds" / "output" / "reference_time.json").read_bytes()
    code, summary, problem = tune(tmp_path, "null_seeds", "--duration", "3")
    assert code == 0 and summary.ok and summary.best is not None and summary.best.confirmed
    big, small = summary.cases
    assert (big.reference_ms, big.reference_source) == (pytest.approx(0.85), "seeded")
    assert big.speedup == pytest.approx(0.85 / big.time_ms)
    assert small.status == "ok" and small.time_ms  # tuned to a valid best all the same
    assert (small.reference_ms, small.reference_source, small.speedup) == (None, "no baseline", None)
    assert summary.score is None
    assert (problem / "output" / "reference_time.json").read_bytes() == before  # never measured, never written
