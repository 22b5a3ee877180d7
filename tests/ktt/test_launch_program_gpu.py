"""GPU tests of launch programs: the multipass_sum example (repeat / until / swap / per-pass
scalars) tunes to a valid best, and its hostile twin, which never raises its until flag, ends
every configuration as runtime_error after max_passes passes - no hang, no best.

Run with ``pytest -m gpu tests/ktt/test_launch_program_gpu.py``; KTT_GPU_TEST_OUT keeps the
summaries and results.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ktt.protocol import ConfigResult, ProfileReport, TuneSummary

ROOT = Path(__file__).resolve().parents[2]
SUM = ROOT / "problems" / "multipass_sum"
SPEC = SUM / "example" / "tuning.yaml"
pytestmark = pytest.mark.gpu


def _keep(path: Path, name: str) -> None:
    dest = os.environ.get("KTT_GPU_TEST_OUT")
    if dest and path.exists():
        Path(dest).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(dest) / name)


def tune(kernel: Path, out: Path, *extra: str, timeout: float = 400) -> tuple[int, TuneSummary, list[ConfigResult]]:
    args = ["tune", "--problem", SUM, "--kernel", kernel, "--spec", SPEC, "--output", out, *extra]
    proc = subprocess.run(
        [sys.executable, "-m", "ktt", *map(str, args), "--json"],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines and lines[-1]["type"] == "result", (proc.stdout[-3000:], proc.stderr[-3000:])
    rows = [ConfigResult.model_validate_json(ln) for ln in (out / "results.jsonl").read_text().splitlines()]
    return proc.returncode, TuneSummary.model_validate(lines[-1]), rows


@pytest.fixture(scope="module")
def tuned_example(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, TuneSummary, list[ConfigResult], Path]:
    tmp = tmp_path_factory.mktemp("multipass")
    out = tmp / "out"
    code, summary, rows = tune(
        SUM / "example" / "kernels.cu", out, "--duration", "0", "--reference-time", str(tmp / "r.json")
    )
    _keep(out / "summary.json", "summary_multipass_sum.json")
    _keep(out / "results.jsonl", "results_multipass_sum.jsonl")
    return code, summary, rows, out


def test_the_multipass_example_tunes_to_a_valid_best(tuned_example: tuple) -> None:
    code, summary, rows, _ = tuned_example
    assert code == 0, summary.message
    by_case: dict[str, list[ConfigResult]] = {}
    for r in rows:
        by_case.setdefault(r.shape or "", []).append(r)
    assert {k: len(v) for k, v in by_case.items()} == {"long_rows": 25, "many_rows": 25}
    bad = [(r.shape, r.config, r.status, r.error) for r in rows if r.status != "ok"]
    assert not bad, bad  # every configuration of the known-good kernel sums exactly
    assert summary.best is not None and summary.best.confirmed and summary.best.time_ms
    assert summary.best.launch_ms is None  # a program with a loop is timed as a whole
    cases = {c.name: c for c in summary.cases}
    assert all(c.status == "ok" and c.speedup for c in cases.values()), cases
    assert summary.worker_restarts == 0


def test_profile_of_the_best_covers_every_pass(tuned_example: tuple, tmp_path: Path) -> None:
    out = tuned_example[3]
    kernel = SUM / "example" / "kernels.cu"
    proc = subprocess.run(
        [
            sys.executable, "-m", "ktt", "profile", "--problem", str(SUM), "--kernel", str(kernel),
            "--spec", str(SPEC), "--from-summary", str(out / "summary.json"), "--output", str(tmp_path), "--json",
        ],
        capture_output=True, text=True, timeout=400, cwd=ROOT,
    )  # fmt: skip
    lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    report = ProfileReport.model_validate(lines[-1])
    if report.error_kind in ("ncu_missing", "no_permission"):
        pytest.skip(f"ncu cannot profile here: {report.error}")
    _keep(tmp_path / "profile.json", "profile_multipass_sum.json")
    assert proc.returncode == 0 and report.ok, report.error
    # pass 0 plus at least one pass of the until loop, all of one run (no warm-up run to skip)
    assert len(report.kernels) >= 2 and {k.kernel for k in report.kernels} == {"sum_pass"}


def test_the_hostile_twin_fails_after_max_passes_and_is_never_best(tmp_path: Path) -> None:
    out = tmp_path / "out"
    start = time.monotonic()
    code, summary, rows = tune(
        SUM / "hostile" / "kernels.cu",
        out,
        "--duration",
        "0",
        "--config-timeout",
        "10",
        "--reference-time",
        str(tmp_path / "ref.json"),
    )
    wall = time.monotonic() - start
    _keep(out / "results.jsonl", "results_multipass_sum_hostile.jsonl")
    assert code == 1 and summary.best is None
    primary = [r for r in rows if r.shape == "long_rows"]
    assert len(primary) == 25 and len(rows) == 25, "the run stops after the first case without a valid result"
    message = "launches[1].repeat: until flag 'done' was still 0 after max_passes = 8 passes"
    for r in rows:
        assert r.status == "runtime_error", (r.config, r.status, r.error)
        assert "max_passes" in r.flags and message in (r.error or ""), r.error
        assert r.time_ms is None and not r.confirmed
    cases = {c.name: c.status for c in summary.cases}
    assert cases == {"long_rows": "no_valid", "many_rows": "not_run"}
    assert summary.worker_restarts == 0  # a pass budget is not a crash: the worker lives on
    assert wall < 300, f"took {wall:.0f} s"
