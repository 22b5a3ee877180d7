"""``python -m ktt tune`` without --json: the summary a person reads, with the per-case table."""

from __future__ import annotations

from ktt.cli import _human
from ktt.protocol import CaseResult, ConfigResult, TuneSummary


def summary(cases: list[CaseResult], **more: object) -> TuneSummary:
    best = ConfigResult(index=0, config={"B": 64}, status="ok", time_ms=0.5, min_ms=0.49, max_ms=0.52, repeats=9)
    return TuneSummary(
        ok=True, problem="p", kernel_file="k", spec_file="s", space_size=4, evaluated=8, valid=8,
        strategy="exhaustive", seed=0, best=best, reference_ms=2.0, reference_source="seeded", speedup=4.0,
        cases=cases, wall_s=1.0, results_file="out/results.jsonl", **more,
    )  # fmt: skip


def test_several_cases_print_a_table_and_the_score() -> None:
    cases = [
        CaseResult(name="big", status="ok", time_ms=0.5, reference_ms=2.0, reference_source="seeded", speedup=4.0,
                   budget_s=20, evaluated=4, valid=4),
        CaseResult(name="tail", status="no_valid", reference_ms=0.1, reference_source="measured", budget_s=5,
                   evaluated=4, valid=0, error="no configuration passed validation"),
    ]  # fmt: skip
    text = _human(summary(cases, score=None, warnings=["tail: timed by wall clock"], message="case tail: x"))
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["case", "status"])
    assert lines[header + 1].split() == ["big", "ok", "0.5", "ms", "2", "ms", "(seeded)", "4x", "20", "s", "4/4"]
    assert lines[header + 2].split()[:2] == ["tail", "no_valid"] and "0/4" in lines[header + 2]
    assert "  tail: no configuration passed validation" in lines
    assert "warning: tail: timed by wall clock" in lines and "score" not in text
    assert lines[1].startswith("best [default]: 0.5 ms")  # with several cases the best says whose it is


def test_one_shape_prints_no_table() -> None:
    text = _human(summary([CaseResult(name="default", status="ok", time_ms=0.5, speedup=4.0)]))
    assert "case " not in text and "speedup over the reference (2 ms, seeded): 4x" in text


def test_a_case_with_no_baseline_is_said_in_the_table_and_the_score_line() -> None:
    cases = [
        CaseResult(name="big", status="ok", time_ms=0.5, reference_ms=2.0, reference_source="seeded", speedup=4.0,
                   budget_s=20, evaluated=4, valid=4),
        CaseResult(name="small", status="ok", time_ms=0.05, reference_source="no baseline", budget_s=5,
                   evaluated=4, valid=4),
    ]  # fmt: skip
    lines = _human(summary(cases, score=None)).splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["case", "status"])
    assert lines[header + 2].split()[:6] == ["small", "ok", "0.05", "ms", "no", "baseline"]
    assert "score: none (a case has no baseline: null in reference_time.json)" in lines
    unbased = {"reference_ms": None, "reference_source": "no baseline", "speedup": None}
    one = _human(summary([]).model_copy(update=unbased))
    assert "speedup: none (no baseline: null in reference_time.json)" in one
