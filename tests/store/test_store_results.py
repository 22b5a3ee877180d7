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
from cacao_tui.store.state import BestResult, FinalResults, TuneOutcome


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


def test_reference_time_file_is_read_leniently(layout: RunLayout) -> None:
    write_branch(layout, "a", [TuneOutcome(ran=False)])
    layout.reference_time.write_text(json.dumps({"time_ms": 4.5, "source": "seeded"}))
    r = rebuild_final_results(layout)
    assert (r.reference_ms, r.reference_source) == (4.5, "seeded")


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
    assert main(["--dir", str(layout.problem_dir), "--best"]) == 0
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
