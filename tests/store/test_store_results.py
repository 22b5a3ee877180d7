"""--best and rebuild_final_results: the summary from final_results.json or from the branch files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from store_fixtures import copy_problem, snapshot, tuned, write_branch, write_context, write_master

from cacao_tui.cli import main
from cacao_tui.store.atomic import write_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.results import FROM_BRANCHES, FROM_FILE, load_results, rebuild_final_results, render_results
from cacao_tui.store.state import BestResult, CaseOutcome, FinalResults, TuneOutcome


@pytest.fixture
def layout(tmp_path: Path) -> RunLayout:
    return RunLayout(copy_problem("mmul", tmp_path))


def test_rebuild_picks_the_fastest_eligible_iteration(layout: RunLayout) -> None:
    write_context(layout)
    write_master(layout)
    write_branch(layout, "tiling", [tuned(2.0), tuned(0.5), None], created_at=1)
    write_branch(layout, "tiling-db", [tuned(0.4), tuned(0.1, suspect=True)], parent="tiling", created_at=3)
    write_branch(layout, "naive", [TuneOutcome(ran=False, message="dry"), tuned(3.0)], created_at=2)
    write_branch(layout, "broken", [], status="failed", created_at=4, stop_reason=None)
    r = rebuild_final_results(layout)
    assert r.rebuilt and r.complete and r.problem_name == "mmul"
    assert r.best is not None
    assert (r.best.branch, r.best.iteration, r.best.time_ms) == ("tiling-db", 1, 0.4)
    assert r.best.kernel_path == "branches/tiling-db/iter1/kernels.cu"
    assert r.best.config == {"TILE": 16}
    assert [b.name for b in r.branches] == ["tiling", "tiling-db", "naive", "broken"]  # tree order
    by_name = {b.name: b for b in r.branches}
    assert (by_name["tiling"].best_ms, by_name["tiling"].best_iteration, by_name["tiling"].iterations) == (0.5, 2, 3)
    assert by_name["naive"].best_ms == 3.0
    assert by_name["broken"].best_ms is None and by_name["broken"].status == "failed"
    assert r.reference_ms == 10.0


def test_with_cases_only_scored_kernels_count(layout: RunLayout) -> None:
    write_context(layout, cases=["small"])
    write_branch(layout, "a", [tuned(0.1), tuned(0.9, score=2.0), tuned(0.8, score=1.5)])
    r = rebuild_final_results(layout)
    assert r.best is not None and (r.best.iteration, r.best.score) == (2, 2.0)


def test_an_unfinished_run_is_incomplete(layout: RunLayout) -> None:
    write_context(layout)
    write_master(layout, phase="dispatched")
    write_branch(layout, "a", [tuned(1.0)], status="running")
    assert not rebuild_final_results(layout).complete


def test_the_manifest_best_counts_when_its_state_file_is_gone(layout: RunLayout) -> None:
    best = BestResult(branch="a", iteration=7, time_ms=0.05, kernel_path="branches/a/iter7/kernels.cu")
    write_branch(layout, "a", [tuned(1.0)], best=best)
    r = rebuild_final_results(layout)
    assert r.best == best
    assert r.problem_name == layout.problem_dir.name  # no context.json: the directory name


def test_unreadable_files_become_notes(layout: RunLayout) -> None:
    write_branch(layout, "a", [tuned(1.0)])
    write_branch(layout, "b", [tuned(0.5)])
    layout.branch("b").iteration(1).state.write_text("{not json")
    layout.branch("a").manifest.write_text("[]")
    loaded = load_results(layout)
    assert loaded.source == FROM_BRANCHES
    assert [b.name for b in loaded.results.branches] == ["b"]  # type: ignore[union-attr]
    assert len(loaded.notes) == 2 and all(n.startswith("skipped ") for n in loaded.notes)


def test_final_results_json_is_preferred(layout: RunLayout) -> None:
    write_branch(layout, "a", [tuned(1.0)])
    saved = FinalResults(problem_name="mmul", cost_usd=1.5, tokens={"input": 10})
    write_model(layout.final_results, saved)
    loaded = load_results(layout)
    assert loaded.source == FROM_FILE and loaded.results == saved
    layout.final_results.write_text("{broken")
    loaded = load_results(layout)
    assert loaded.source == FROM_BRANCHES and loaded.notes


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"reference_time_us": 4500, "cases": {"small": None}}, (4.5, "seeded")),  # the original's form
        ({"ms": 4.5, "source": "measured"}, (4.5, "measured")),  # ktt's earlier form
        (
            {"reference_time_us": 4500, "provenance": {"reference_time_us": {"source": "measured"}}},
            (4.5, "measured"),
        ),
    ],
)
def test_reference_time_file_is_read_in_either_form(layout: RunLayout, data: dict, expected: tuple) -> None:
    write_branch(layout, "a", [TuneOutcome(ran=False)])
    layout.reference_time.write_text(json.dumps(data))
    r = rebuild_final_results(layout)
    assert (r.reference_ms, r.reference_source) == expected
    assert r.reference_time_us == 4500


def test_an_unreadable_reference_time_file_is_a_note_for_best(layout: RunLayout) -> None:
    write_branch(layout, "a", [TuneOutcome(ran=False)])
    layout.reference_time.write_text("{oops")
    loaded = load_results(layout)
    assert loaded.results is not None and loaded.results.reference_ms is None
    assert any("reference_time.json: not valid JSON" in n for n in loaded.notes)


def test_the_originals_keys_are_beside_ours(layout: RunLayout) -> None:
    write_context(layout)
    write_master(layout)
    write_branch(layout, "tiling", [tuned(2.0), tuned(0.5)], created_at=1)
    write_branch(layout, "broken", [TuneOutcome(ran=False, message="x")], status="failed", created_at=2)
    r = rebuild_final_results(layout)
    assert (r.best_branch, r.best_config, r.best_time_us, r.speedup) == ("tiling", {"TILE": 16}, 500.0, 20.0)
    assert r.total_branches == 2 and r.reference_time_us == 10000.0
    data = json.loads(r.model_dump_json())
    assert data["all_branches"] == [
        {
            "name": "tiling",
            "path": str(layout.branch("tiling").root),
            "status": "success",
            "best_time_us": 500.0,
            "speedup": 20.0,
            "iterations": 2,
        },
        {
            "name": "broken",
            "path": str(layout.branch("broken").root),
            "status": "failed",
            "best_time_us": None,
            "speedup": None,
            "iterations": 1,
        },
    ]


def test_with_cases_the_originals_speedup_is_the_geometric_mean(layout: RunLayout) -> None:
    write_context(layout, cases=["big", "small"])
    write_branch(layout, "a", [tuned(0.5, score=3.0)])
    r = rebuild_final_results(layout)
    assert r.speedup == 3.0 and r.all_branches[0].speedup == 3.0 and r.best is not None and r.best.speedup == 20.0


def test_an_older_final_results_json_gets_the_originals_keys_when_read(layout: RunLayout) -> None:
    best = BestResult(branch="a", iteration=2, time_ms=0.25, speedup=4.0, kernel_path="k", config={"B": 1})
    layout.final_results.parent.mkdir(parents=True, exist_ok=True)
    layout.final_results.write_text(
        FinalResults(problem_name="mmul", best=best).model_dump_json(exclude={"best_branch"})
    )
    loaded = load_results(layout)
    assert loaded.source == FROM_FILE and loaded.results is not None
    assert (loaded.results.best_branch, loaded.results.best_time_us, loaded.results.speedup) == ("a", 250.0, 4.0)


def test_rebuild_writes_nothing(layout: RunLayout) -> None:
    write_context(layout)
    write_branch(layout, "a", [tuned(1.0)])
    before = snapshot(layout.problem_dir)
    rebuild_final_results(layout)
    load_results(layout)
    assert snapshot(layout.problem_dir) == before


def test_render_marks_the_best_branch(layout: RunLayout) -> None:
    write_context(layout)
    write_master(layout)
    write_branch(layout, "tiling", [tuned(2.0)], created_at=1)
    write_branch(layout, "vector", [tuned(0.5)], parent="tiling", created_at=2)
    text = render_results(load_results(layout), layout)
    lines = text.splitlines()
    assert lines[0] == f"mmul: results from {FROM_BRANCHES} (complete run)"
    assert "best       vector iteration 1: 0.5 ms, 20x over the reference" in text
    assert "kernel     output/branches/vector/iter1/kernels.cu" in text
    assert "config     TILE=16" in text
    star = [line for line in lines if line.startswith("*")]
    assert len(star) == 1 and "  vector" in star[0]


def test_cli_best_never_run(layout: RunLayout, capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(layout.problem_dir)
    assert main(["--dir", str(layout.problem_dir), "--best"]) == 0  # no results: said, exit 0 as the original's
    assert "has not been run yet" in capsys.readouterr().out
    (layout.archive / "output_1").mkdir(parents=True)
    assert main(["--dir", str(layout.problem_dir), "--best"]) == 0
    assert "1 earlier run is archived (latest: archive/output_1)" in capsys.readouterr().out
    layout.archive.joinpath("output_1").rmdir()
    layout.archive.rmdir()
    assert snapshot(layout.problem_dir) == before


def test_cli_best_table_and_json(layout: RunLayout, capsys: pytest.CaptureFixture[str]) -> None:
    write_context(layout, dry_run=True)
    write_master(layout)
    write_branch(layout, "a", [TuneOutcome(ran=False, message="not run")])
    assert main(["--dir", str(layout.problem_dir), "--best"]) == 0
    out = capsys.readouterr().out
    assert "dry run" in out and "best       none" in out
    assert main(["--dir", str(layout.problem_dir), "--best", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["rebuilt"] is True and data["branches"][0]["name"] == "a"


def test_best_prints_the_iteration_timeline(layout: RunLayout) -> None:
    write_context(layout)
    write_master(layout)
    write_branch(
        layout, "tiling", [tuned(2.0), None, tuned(4.0), tuned(0.5)], actions=["continue", "retry", "continue", "stop"]
    )
    write_branch(layout, "naive", [tuned(1.0)], actions=["stop"], created_at=1)
    r = rebuild_final_results(layout)
    points = r.branches[0].timeline
    assert [(p.iteration, p.time_ms, p.action, p.new_best) for p in points] == [
        (1, 2.0, "continue", True),
        (2, None, "retry", False),
        (3, 4.0, "continue", False),
        (4, 0.5, "stop", True),
    ]
    text = render_results(load_results(layout), layout)
    block = text[text.index("iteration timeline") :].splitlines()
    assert block[1] == "  [tiling]"
    assert block[2].startswith("    iter 1:         2 ms  [########........................]  continue")
    assert block[2].endswith("*")
    assert "(no result)" in block[3] and "retry" in block[3]
    assert block[5] == "    iter 4:       0.5 ms  [" + "#" * 32 + "]  stop      *"
    assert block[6] == "  [naive]"


def test_best_shows_the_per_case_table(layout: RunLayout, capsys: pytest.CaptureFixture[str]) -> None:
    write_context(layout, cases=["big", "small"])
    write_master(layout)
    cases = [
        CaseOutcome(name="big", status="ok", time_ms=0.5, reference_ms=10.0, reference_source="seeded", speedup=20.0,
                    config={"TILE": 32}, budget_s=120, evaluated=40, valid=31),
        CaseOutcome(name="small", status="ok", time_ms=0.05, reference_ms=0.2, reference_source="measured",
                    speedup=4.0, config={"TILE": 8}, budget_s=30, evaluated=12, valid=12),
    ]  # fmt: skip
    write_branch(layout, "a", [tuned(0.5, score=8.94, cases=cases)])
    text = render_results(load_results(layout), layout)
    table = text[text.index("\ncases\n") + 1 :].splitlines()[1:4]
    assert table[0].split() == ["case", "status", "best", "reference", "speedup", "budget", "valid", "config"]
    assert table[1].split() == ["big", "ok", "0.5", "ms", "10", "ms", "(seeded)", "20x", "120", "s", "31/40", "TILE=32"]
    assert table[2].split()[:8] == ["small", "ok", "0.05", "ms", "0.2", "ms", "(measured)", "4x"]
    assert main(["--dir", str(layout.problem_dir), "--best", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [c["name"] for c in data["best"]["cases"]] == ["big", "small"]
    assert data["best"]["cases"][1]["reference_source"] == "measured"
    assert data["best_branch"] == "a" and data["speedup"] == 8.94


def test_a_case_with_no_baseline_shows_so_and_the_best_ranks_by_time(
    layout: RunLayout, capsys: pytest.CaptureFixture[str]
) -> None:
    """A null in reference_time.json: the case has no speedup, the score is null (the original's rule),
    and the kernel valid on every case is still the best (by time), shown as "no baseline" everywhere."""
    write_context(layout, cases=["big", "small"])
    write_master(layout)
    layout.reference_time.write_text('{"reference_time_us": 10000, "cases": {"small": null}}')

    def cases(ms: float) -> list[CaseOutcome]:
        return [
            CaseOutcome(name="big", status="ok", time_ms=ms, reference_ms=10.0, reference_source="seeded",
                        speedup=10.0 / ms, evaluated=4, valid=4),
            CaseOutcome(name="small", status="ok", time_ms=ms / 10, reference_source="no baseline",
                        evaluated=4, valid=4),
        ]  # fmt: skip

    failed = [
        CaseOutcome(name="big", status="ok", time_ms=0.1, speedup=100.0),
        CaseOutcome(name="small", status="no_valid"),
    ]
    write_branch(layout, "a", [tuned(2.0, cases=cases(2.0)), tuned(0.5, cases=cases(0.5)), tuned(0.1, cases=failed)])
    r = rebuild_final_results(layout)
    assert r.best is not None and (r.best.iteration, r.best.score) == (2, None)  # 0.1 failed a case
    text = render_results(load_results(layout), layout)
    assert "no score (a case has no baseline)" in text
    small = next(line for line in text.splitlines() if line.strip().startswith("small"))
    assert small.split()[:5] == ["small", "ok", "0.05", "ms", "no"] and "baseline" in small
    assert main(["--dir", str(layout.problem_dir), "--best", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["best"]["cases"][1]["reference_source"] == "no baseline" and data["best"]["score"] is None


def measured(record: dict) -> dict:
    return {"reference_time_us": 10000, "provenance": {"reference_time_us": record}}


def test_best_shows_the_references_timed_calls_and_warns_about_their_spread(layout: RunLayout) -> None:
    """A measured reference's median, fastest, slowest and count (reference_time.json's provenance)."""
    write_context(layout)
    write_master(layout)
    write_branch(layout, "a", [tuned(1.0)])
    record = {"source": "measured", "method": "wall clock around the call", "samples": 3, "min_ms": 9.0, "max_ms": 12.0}
    layout.reference_time.write_text(json.dumps(measured(record)))
    r = rebuild_final_results(layout)
    assert (r.reference_samples, r.reference_min_ms, r.reference_max_ms) == (3, 9.0, 12.0)
    text = render_results(load_results(layout), layout)
    assert "reference  10 ms (measured), median of 3 calls, 9 to 12 ms, 30.0% spread (over 10%)" in text
    assert "warning: the reference's 3 timed calls spread 30% (over 10%): every speedup shares this denominator" in text
    record.update(min_ms=9.8, max_ms=10.4)  # 6 %: shown, no warning
    layout.reference_time.write_text(json.dumps(measured(record)))
    text = render_results(load_results(layout), layout)
    assert "median of 3 calls, 9.8 to 10.4 ms, 6.0% spread" in text and "warning:" not in text
