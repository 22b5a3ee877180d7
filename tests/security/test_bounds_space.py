"""Class 2 of issue 10: a model-written space of 10^12 configurations whose restriction is always
false ends in seconds with one line, in ``ktt check`` and in ``ktt tune`` (it used not to finish)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from bounds_problem import TINY, make_problem

from ktt.cli import main
from ktt.protocol import TuneSummary
from ktt.space import ENUMERATION_TIME_BUDGET_S
from ktt.tune import TuneOptions, tune

FAKE_WORKER = [sys.executable, str(Path(__file__).resolve().parents[1] / "ktt" / "fake_worker.py")]
PARAMS = "\n".join(f"  P{i}: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]" for i in range(12))
HUGE_EMPTY_SPEC = f"""tune_params:
  BLOCK: [128]
{PARAMS}
restrictions:
  - P11 < 0
launches:
  - kernel: scale
    grid: {{x: (N + 127) / 128}}
    block: {{x: BLOCK}}
"""
LIMIT_S = ENUMERATION_TIME_BUDGET_S + 20  # the budget, the probe, loading; generous for a loaded CI machine


def test_ktt_check_ends_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = make_problem(tmp_path)
    spec = tmp_path / "tuning.yaml"
    spec.write_text(HUGE_EMPTY_SPEC)
    start = time.perf_counter()
    args = ["check", "--problem", str(root), "--kernel", str(TINY / "kernels.cu"), "--spec", str(spec)]
    code = main([*args, "--json", "--arch", "sm_90", "--cache-dir", str(tmp_path / "cache")])
    assert time.perf_counter() - start < LIMIT_S
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code != 0 and not report["ok"]
    assert "no configuration satisfies the restrictions" in report["message"]
    assert "1,000,000,000,000 configurations" in report["message"] and "\n" not in report["message"]


def test_ktt_tune_ends_with_one_line(tmp_path: Path) -> None:
    spec = tmp_path / "tuning.yaml"
    spec.write_text(HUGE_EMPTY_SPEC)
    lines: list = []
    opts = TuneOptions(
        problem_dir=make_problem(tmp_path),
        kernel=TINY / "kernels.cu",
        spec=spec,
        output=tmp_path / "out",
        worker_command=FAKE_WORKER,
        arch="sm_90",
        cache_dir=tmp_path / "cache",
        compile_workers=1,
        reference_time=tmp_path / "reference_time.json",
    )  # type: ignore[call-arg]
    start = time.perf_counter()
    code = tune(opts, lines.append)
    assert time.perf_counter() - start < LIMIT_S
    summary = next(x for x in lines if isinstance(x, TuneSummary))
    assert code != 0 and "no configuration satisfies the restrictions" in (summary.message or "")
