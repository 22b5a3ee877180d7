"""The tuner's orchestration on the CPU: real NVRTC compiles, a fake GPU worker (tests/ktt/fake_worker.py)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from ktt.protocol import ConfigResult, ErrorLine, Progress, TuneSummary
from ktt.tune import TuneOptions, tune

DATA = Path(__file__).parent / "data" / "tiny"
FAKE = [sys.executable, str(Path(__file__).parent / "fake_worker.py")]


def run(tmp_path: Path, spec_text: str | None = None, **kw: object) -> tuple[int, list, TuneSummary | None, list]:
    spec = DATA / "tuning.yaml"
    if spec_text is not None:
        spec = tmp_path / "tuning.yaml"
        spec.write_text(spec_text)
    out = tmp_path / "out"
    lines: list = []
    opts = TuneOptions(
        problem_dir=DATA,
        kernel=DATA / "kernels.cu",
        spec=spec,
        output=out,
        worker_command=FAKE,
        arch="sm_90",
        cache_dir=tmp_path / "cache",
        compile_workers=2,
        reference_time=tmp_path / "reference_time.json",
        **kw,
    )  # type: ignore[arg-type]
    code = tune(opts, lines.append)
    summary = next((x for x in lines if isinstance(x, TuneSummary)), None)
    path = out / "results.jsonl"
    rows = [ConfigResult.model_validate_json(ln) for ln in path.read_text().splitlines()] if path.exists() else []
    return code, lines, summary, rows


def spec(behaviours: list[int], blocks: list[int] = [64], unrolls: list[int] = [1]) -> str:  # noqa: B006
    return (
        f"tune_params:\n  BLOCK: {blocks}\n  UNROLL: {unrolls}\n  BEHAVIOUR: {behaviours}\n"
        "launches:\n  - kernel: scale\n    grid: {x: (N + BLOCK * UNROLL - 1) / (BLOCK * UNROLL)}\n"
        "    block: {x: BLOCK}\n"
    )


def test_exhaustive_run_finds_the_fastest_and_scores_every_case(tmp_path: Path) -> None:
    code, lines, summary, rows = run(tmp_path, duration_s=0)
    assert code == 0 and summary is not None
    base = [r for r in rows if r.shape == "default"]
    assert len(base) == 11 == summary.restricted_size  # 4 x 3 minus BLOCK 256 x UNROLL 4
    assert summary.strategy == "exhaustive"
    assert summary.best is not None and summary.best.config == {"BLOCK": 32, "UNROLL": 4, "BEHAVIOUR": 0}
    assert [c.name for c in summary.cases] == ["default", "half"]
    assert all(c.status == "ok" and c.speedup for c in summary.cases)
    assert summary.score == pytest.approx((2.0 / summary.best.time_ms * 1.0 / summary.best.time_ms) ** 0.5)
    assert summary.speedup == pytest.approx(2.0 / summary.best.time_ms)
    assert any(isinstance(x, Progress) for x in lines)
    ref = json.loads((tmp_path / "reference_time.json").read_text())
    assert ref["ms"] == 2.0 and ref["cases"] == {"half": 1.0} and ref["source"] == "measured"
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["best"]["config"]["BLOCK"] == 32
    assert [r.index for r in rows] == list(range(len(rows)))


def test_hang_and_crash_are_recorded_and_the_search_goes_on(tmp_path: Path) -> None:
    code, _, summary, rows = run(
        tmp_path, spec([0, 1, 2, 3]), duration_s=0, config_timeout_s=2.0, strategy="exhaustive"
    )
    by = {int(r.config["BEHAVIOUR"]): r for r in rows if r.shape == "default"}
    assert {k: v.status for k, v in by.items()} == {0: "ok", 1: "timeout", 2: "runtime_error", 3: "runtime_error"}
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in (by[3].error or "")
    assert summary is not None and summary.worker_restarts >= 3
    assert code == 0 and summary.best is not None and summary.best.config["BEHAVIOUR"] == 0


def test_compile_errors_are_results_with_line_diagnostics(tmp_path: Path) -> None:
    code, _, _summary, rows = run(tmp_path, spec([0, 9]), duration_s=0)
    bad = next(r for r in rows if r.config["BEHAVIOUR"] == 9)
    assert bad.status == "compile_failed"
    assert bad.diagnostics and bad.diagnostics[0].file == "kernels.cu" and bad.diagnostics[0].line == 10
    assert code == 0


def test_count_budget(tmp_path: Path) -> None:
    code, _, summary, rows = run(tmp_path, max_configs=3, duration_s=0)
    assert code == 0 and summary is not None
    assert summary.evaluated == len(rows) - 1 == 3  # 3 searched + the best on the case "half"
    assert len([r for r in rows if r.shape == "default"]) == 3


def test_time_budget_stops_the_search(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_EVAL_S", "0.4")
    start = time.monotonic()
    code, _, summary, rows = run(tmp_path, duration_s=4.0)
    wall = time.monotonic() - start
    assert summary is not None and code == 0
    searched = [r for r in rows if r.shape == "default"]
    assert 1 <= len(searched) < 11
    assert wall < 4.0 + 5.0


def test_bad_spec_is_exit_2_with_one_line(tmp_path: Path) -> None:
    code, lines, summary, _ = run(
        tmp_path, "tune_params: {B: [1]}\nlaunches:\n  - kernel: scale\n    grid: {x: Q}\n    block: {x: 1}\n"
    )
    assert code == 2 and summary is None
    err = next(x for x in lines if isinstance(x, ErrorLine))
    assert "launches[0].grid.x" in err.message and "'Q'" in err.message
