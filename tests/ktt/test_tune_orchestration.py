"""The tuner's orchestration on the CPU: real NVRTC compiles, a fake GPU worker (tests/ktt/fake_worker.py)."""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

import pytest

from ktt.protocol import ConfigResult, ErrorLine, LogLine, Progress, TuneSummary
from ktt.tune import TuneOptions, tune

DATA = Path(__file__).parent / "data" / "tiny"
FAKE = [sys.executable, str(Path(__file__).parent / "fake_worker.py")]


def run(
    tmp_path: Path,
    spec_text: str | None = None,
    problem: Path = DATA,
    kernel_text: str | None = None,
    **kw: object,
) -> tuple[int, list, TuneSummary | None, list]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    spec = DATA / "tuning.yaml"
    if spec_text is not None:
        spec = tmp_path / "tuning.yaml"
        spec.write_text(spec_text)
    kernel = DATA / "kernels.cu"
    if kernel_text is not None:
        kernel = tmp_path / "kernels.cu"
        kernel.write_text(kernel_text)
    out = tmp_path / "out"
    lines: list = []
    kw.setdefault("reference_time", tmp_path / "reference_time.json")
    opts = TuneOptions(
        problem_dir=problem,
        kernel=kernel,
        spec=spec,
        output=out,
        worker_command=FAKE,
        arch="sm_90",
        cache_dir=tmp_path / "cache",
        compile_workers=2,
        **kw,
    )  # type: ignore[arg-type]
    code = tune(opts, lines.append)
    summary = next((x for x in lines if isinstance(x, TuneSummary)), None)
    path = out / "results.jsonl"
    rows = [ConfigResult.model_validate_json(ln) for ln in path.read_text().splitlines()] if path.exists() else []
    return code, lines, summary, rows


def problem_copy(tmp_path: Path, cases: str | None) -> Path:
    """The tiny problem with its ``cases:`` block replaced (None: no cases at all)."""
    d = tmp_path / "problem"
    shutil.copytree(DATA, d)
    text = (d / "problem.yaml").read_text()
    text = text[: text.index("cases:")] + (cases or "")
    (d / "problem.yaml").write_text(text)
    return d


def spec(behaviours: list[int], blocks: list[int] = [64], unrolls: list[int] = [1]) -> str:  # noqa: B006
    return (
        f"tune_params:\n  BLOCK: {blocks}\n  UNROLL: {unrolls}\n  BEHAVIOUR: {behaviours}\n"
        "launches:\n  - kernel: scale\n    grid: {x: (N + BLOCK * UNROLL - 1) / (BLOCK * UNROLL)}\n"
        "    block: {x: BLOCK}\n"
    )


def test_each_case_is_tuned_on_its_own_and_scored_by_the_geometric_mean(tmp_path: Path) -> None:
    code, lines, summary, rows = run(tmp_path, duration_s=0)
    assert code == 0 and summary is not None and summary.ok
    out = tmp_path / "out"
    # Each case searched the whole (restricted) space at its own shape, in declared order.
    assert [r.shape for r in rows] == ["default"] * 11 + ["half"] * 11
    assert [r.index for r in rows] == list(range(22))
    assert [c.name for c in summary.cases] == ["default", "half"]
    default, half = summary.cases
    assert default.config == {"BLOCK": 32, "UNROLL": 4, "BEHAVIOUR": 0}  # small blocks win on default
    assert half.config == {"BLOCK": 128, "UNROLL": 4, "BEHAVIOUR": 0}  # large blocks win on half (fake worker)
    assert (default.evaluated, default.valid, half.evaluated, half.valid) == (11, 11, 11, 11)
    assert default.reference_ms == 2.0 and half.reference_ms == 1.0
    assert default.time_ms and half.time_ms
    assert default.speedup == pytest.approx(2.0 / default.time_ms)
    assert half.speedup == pytest.approx(1.0 / half.time_ms)
    assert summary.score == pytest.approx((default.speedup * half.speedup) ** 0.5)
    assert summary.best is not None and summary.best.config == default.config and summary.best.shape == "default"
    assert summary.speedup == default.speedup and summary.evaluated == 22 and summary.restricted_size == 11
    assert summary.strategy == "exhaustive"
    # Per-case results beside each other: case_<name>/results.jsonl and summary.json.
    for case in summary.cases:
        d = out / f"case_{case.name}"
        assert case.results_file == str(d / "results.jsonl")
        own = [ConfigResult.model_validate_json(x) for x in (d / "results.jsonl").read_text().splitlines()]
        assert len(own) == 11 and {r.shape for r in own} == {case.name}
        one = TuneSummary.model_validate_json((d / "summary.json").read_text())
        assert one.best is not None and one.best.config == case.config and one.cases == [case]
    assert TuneSummary.model_validate_json((out / "summary.json").read_text()).cases == summary.cases
    progress = [x for x in lines if isinstance(x, Progress)]
    assert {p.case for p in progress if p.phase == "search"} == {"default", "half"}
    assert all(p.cases_total == 2 for p in progress)
    # The denominators, written in the original's form (microseconds), each with its provenance.
    ref = json.loads((tmp_path / "reference_time.json").read_text())
    assert ref["reference_time_us"] == 2000.0 and ref["cases"] == {"half": 1000.0}
    assert ref["provenance"]["reference_time_us"]["source"] == "measured"
    assert ref["provenance"]["cases"]["half"]["device"] == "(not queried)"
    assert default.reference_source == half.reference_source == "measured"


def test_without_cases_the_results_stay_at_the_output_root(tmp_path: Path) -> None:
    code, _, summary, rows = run(tmp_path, problem=problem_copy(tmp_path, None), duration_s=0)
    assert code == 0 and summary is not None
    assert [c.name for c in summary.cases] == ["default"] and len(rows) == 11
    assert not list((tmp_path / "out").glob("case_*"))
    assert summary.score == pytest.approx(summary.speedup)
    ref = json.loads((tmp_path / "reference_time.json").read_text())
    assert ref["reference_time_us"] == 2000.0 and "cases" not in ref


def test_each_case_has_its_own_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KTT_FAKE_EVAL_S", "0.25")
    cases = "cases:\n  - name: default\n    duration_s: 1.5\n  - name: half\n    scalars: {N: 512}\n"
    d = problem_copy(tmp_path, cases)  # tuning.duration_s is 5: the case 'half' takes it
    code, lines, summary, _ = run(tmp_path, problem=d)
    assert code == 0 and summary is not None
    default, half = summary.cases
    assert (default.budget_s, half.budget_s) == (1.5, 5.0)
    assert default.evaluated < 11  # 11 x 0.25 s do not fit in 1.5 s
    assert default.search_s is not None and default.search_s < 1.5 + 1.0
    assert half.search_s is not None and 1.5 < half.search_s < 5.0 + 1.0  # 'half' searched longer, within 5 s
    logs = [x.message for x in lines if isinstance(x, LogLine)]
    assert any("case half (2/2): budget 5 s (problem.yaml)" in m for m in logs)
    # --duration overrides every case's budget (the original's --timeout does the same).
    _, _, summary, _ = run(tmp_path / "o", problem=d, duration_s=0.6)
    assert summary is not None and [c.budget_s for c in summary.cases] == [0.6, 0.6]


def test_the_spec_budget_is_ignored_when_the_problem_owns_the_budget(tmp_path: Path) -> None:
    text = (DATA / "tuning.yaml").read_text() + "duration_s: 0.5\n"
    _, _, summary, _ = run(tmp_path, text)
    assert summary is not None and [c.budget_s for c in summary.cases] == [0.5, 0.5]
    _, _, summary, _ = run(tmp_path / "p", text, problem_budget=True)
    assert summary is not None and [c.budget_s for c in summary.cases] == [5.0, 5.0]


def test_a_case_without_a_valid_result_stops_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KTT_FAKE_INVALID_SHAPE", "default")
    code, lines, summary, rows = run(tmp_path, duration_s=0)
    assert code == 1 and summary is not None and not summary.ok
    assert [(c.name, c.status) for c in summary.cases] == [("default", "no_valid"), ("half", "not_run")]
    assert summary.score is None and summary.best is None
    assert {r.shape for r in rows} == {"default"}
    assert summary.message == "case default: no configuration passed validation; not run: half"
    assert any(isinstance(x, LogLine) and x.level == "error" and "case default" in x.message for x in lines)


def test_a_failing_later_case_leaves_no_score(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KTT_FAKE_INVALID_SHAPE", "half")
    code, _, summary, _ = run(tmp_path, duration_s=0)
    assert code == 1 and summary is not None
    assert [c.status for c in summary.cases] == ["ok", "no_valid"]
    assert summary.best is not None and summary.speedup is not None and summary.score is None


def test_a_case_that_does_not_build_stops_before_any_tuning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "requests.jsonl"
    monkeypatch.setenv("KTT_FAKE_LOG", str(log))
    kernel = (DATA / "kernels.cu").read_text() + "#if N < 1000\n#error this kernel needs N >= 1000\n#endif\n"
    code, lines, summary, rows = run(tmp_path, kernel_text=kernel, duration_s=0)
    assert code == 1 and summary is not None
    assert [(c.name, c.status) for c in summary.cases] == [("default", "not_run"), ("half", "build_failed")]
    assert summary.message is not None and summary.message.startswith("case half does not build:")
    assert "N >= 1000" in summary.message
    err = [x for x in lines if isinstance(x, LogLine) and x.level == "error"]
    assert err and "case half does not build" in err[0].message
    assert rows and all(r.shape == "half" and r.status == "compile_failed" for r in rows)
    assert rows[0].diagnostics and rows[0].diagnostics[0].line == 14  # mapped to kernels.cu
    asked = [json.loads(x) for x in log.read_text().splitlines()]
    assert not any(a["cmd"] in ("shape", "eval") for a in asked)  # no reference, no evaluation


def test_a_seeded_value_is_kept_and_a_null_case_has_no_baseline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The original's rule: null means "no baseline": never timed, never overwritten, no speedup, no score."""
    log = tmp_path / "requests.jsonl"
    monkeypatch.setenv("KTT_FAKE_LOG", str(log))
    ref = tmp_path / "reference_time.json"
    ref.write_text('{"reference_time_us": 500, "cases": {"half": null}, "note": "cuBLAS on a 3090"}\n')
    before = ref.read_text()
    code, lines, summary, _ = run(tmp_path, duration_s=0)
    assert code == 0 and summary is not None and summary.ok
    default, half = summary.cases
    assert (default.reference_ms, default.reference_source) == (0.5, "seeded") and default.speedup
    assert (half.reference_ms, half.reference_source, half.speedup) == (None, "no baseline", None)
    assert half.status == "ok" and half.time_ms  # tuned all the same
    assert summary.score is None  # the geometric mean needs every case's speedup
    assert summary.reference_ms == 0.5 and summary.reference_source == "seeded"
    assert ref.read_text() == before  # the null stays null: nothing measured, nothing written
    shapes = [json.loads(x) for x in log.read_text().splitlines() if '"shape"' in x]
    assert [(s["shape"], s["time_reference"]) for s in shapes] == [("default", False), ("half", False)]
    assert any(isinstance(x, LogLine) and "no baseline" in x.message for x in lines)
    case_half = json.loads((tmp_path / "out" / "case_half" / "summary.json").read_text())
    assert case_half["score"] is None and case_half["cases"][0]["reference_source"] == "no baseline"


def test_a_case_the_file_does_not_name_is_measured_and_recorded(tmp_path: Path) -> None:
    ref = tmp_path / "reference_time.json"
    ref.write_text('{"reference_time_us": 500}\n')
    code, _, summary, _ = run(tmp_path, duration_s=0)
    assert code == 0 and summary is not None
    assert [c.reference_source for c in summary.cases] == ["seeded", "measured"] and summary.score
    data = json.loads(ref.read_text())
    assert data["reference_time_us"] == 500 and data["cases"] == {"half": 1000.0}
    assert "reference_time_us" not in data["provenance"]
    assert data["provenance"]["cases"]["half"]["source"] == "measured"
    # A second run measures nothing and relabels nothing.
    before = ref.read_text()
    _, _, summary, _ = run(tmp_path / "again", duration_s=0, reference_time=ref)
    assert summary is not None and [c.reference_source for c in summary.cases] == ["seeded", "measured"]
    assert ref.read_text() == before


def test_the_earlier_ms_form_is_read_and_filled_in_its_own_unit(tmp_path: Path) -> None:
    ref = tmp_path / "reference_time.json"
    ref.write_text('{"ms": 3.0, "source": "seeded"}\n')
    _, _, summary, _ = run(tmp_path, duration_s=0)
    assert summary is not None and summary.cases[0].reference_ms == 3.0
    assert summary.cases[0].reference_source == "seeded"
    data = json.loads(ref.read_text())
    assert data["ms"] == 3.0 and data["cases"] == {"half": 1.0} and "reference_time_us" not in data


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{not json", "not valid JSON"),
        ('{"reference_time_us": -3}', "reference_time_us: -3 is not a positive number of microseconds"),
        ('{"reference_time_us": 3, "cases": {"half": "fast"}}', 'cases.half: "fast" is not a positive number'),
        ("[1, 2]", "expected a JSON object"),
    ],
)
def test_an_unusable_reference_file_is_exit_2_naming_it(tmp_path: Path, text: str, expected: str) -> None:
    ref = tmp_path / "reference_time.json"
    ref.write_text(text)
    code, lines, summary, _ = run(tmp_path, duration_s=0)
    assert code == 2 and summary is None
    err = next(x for x in lines if isinstance(x, ErrorLine))
    assert err.message.startswith(f"{ref}: ") and expected in err.message and "\n" not in err.message
    assert ref.read_text() == text  # never replaced
    assert not (tmp_path / "out").exists()  # nothing written


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
    assert summary.evaluated == len(rows) == 6  # 3 configurations on each case
    assert [c.evaluated for c in summary.cases] == [3, 3]


def test_time_budget_stops_the_search(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KTT_FAKE_EVAL_S", "0.4")
    start = time.monotonic()
    code, _, summary, rows = run(tmp_path, duration_s=2.0)
    wall = time.monotonic() - start
    assert summary is not None and code == 0
    for name in ("default", "half"):
        assert 1 <= len([r for r in rows if r.shape == name]) < 11
    assert wall < 2 * 2.0 + 5.0


def test_bad_spec_is_exit_2_with_one_line(tmp_path: Path) -> None:
    code, lines, summary, _ = run(
        tmp_path, "tune_params: {B: [1]}\nlaunches:\n  - kernel: scale\n    grid: {x: Q}\n    block: {x: 1}\n"
    )
    assert code == 2 and summary is None
    err = next(x for x in lines if isinstance(x, ErrorLine))
    assert "launches[0].grid.x" in err.message and "'Q'" in err.message
