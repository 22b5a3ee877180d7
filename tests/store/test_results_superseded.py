"""Iterations a revert left behind: kept, marked, and still eligible as the best, in the engine and
in the results alike (final_results.json, ``cacao --best``).

A revert to N marks the later iterations superseded and the branch goes on from N's kernel.
The engine leaves the branch's best as it is (a later iteration becomes the best only by
beating it), so the results rebuilt from disk must name the same best, marked superseded,
and count the branch's iterations on its current line, as max_iter does.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from store_fixtures import copy_problem, tuned, write_branch, write_context, write_master

from cacao_tui.cli import main
from cacao_tui.engine.control import queue_revert
from cacao_tui.store.atomic import read_model, write_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.results import load_results, rebuild_final_results, render_results
from cacao_tui.store.state import BranchManifest, FinalResults
from tests.engine.conftest import make_engine
from tests.engine.scenario import Scenario

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def mmul(tmp_path: Path) -> Path:
    target = tmp_path / "mmul"
    shutil.copytree(ROOT / "problems" / "mmul", target, ignore=shutil.ignore_patterns("output", "archive"))
    return target


def _reverted_run(problem: Path, times: dict[int, float]) -> tuple[BranchManifest, FinalResults, object]:
    """Four iterations, a revert to 2 queued between runs, then --resume: iterations 5 and 6 follow 2."""
    scenario = Scenario(strategies=["alpha"], time_ms=lambda branch, i: times[i])
    asyncio.run(make_engine(problem, scenario.provider(), max_iter=4, n_strategies=1).run())
    queue_revert(RunLayout(problem), "b1-alpha", 2, default_max_iter=4)
    engine = make_engine(problem, scenario.provider(), max_iter=4, n_strategies=1, resumed=True)
    asyncio.run(engine.run())
    layout = RunLayout(problem)
    return (
        read_model(layout.branch("b1-alpha").manifest, BranchManifest),
        read_model(layout.final_results, FinalResults),
        engine,
    )


def test_a_superseded_best_stays_the_best_in_the_engine_and_the_results(
    mmul: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    m, final, engine = _reverted_run(mmul, {1: 2.0, 2: 1.0, 3: 0.5, 4: 0.25, 5: 0.8, 6: 0.6})
    assert m.superseded == [3, 4] and m.iterations_done == 4  # 1, 2, 5, 6
    # The engine: the branch's best and the run's best are still iteration 4.
    assert m.best is not None and m.best.iteration == 4
    assert engine.best is not None and (engine.best.branch, engine.best.iteration) == ("b1-alpha", 4)  # type: ignore[attr-defined]
    # final_results.json agrees, and says the best was superseded.
    assert final.best is not None and (final.best.branch, final.best.iteration) == ("b1-alpha", 4)
    assert final.best.time_ms == pytest.approx(m.best.time_ms) and final.best.superseded
    assert final.best_branch == "b1-alpha" and final.best_time_us == pytest.approx(m.best.time_ms * 1e3)
    (branch,) = final.branches
    assert branch.superseded == [3, 4] and branch.best_iteration == 4
    assert branch.iterations == 4  # the current line's decided iterations, as max_iter counts them
    assert [(p.iteration, p.superseded) for p in branch.timeline] == [
        (1, False), (2, False), (3, True), (4, True), (5, False), (6, False)
    ]  # fmt: skip
    assert [p.iteration for p in branch.timeline if p.new_best] == [1, 2, 3, 4]
    # cacao --best shows it, marked.
    assert main(["--dir", str(mmul), "--best", "--no-ui"]) == 0
    text = capsys.readouterr().out
    assert "best       b1-alpha iteration 4:" in text
    assert "(iteration 4 was superseded by a revert; still the fastest measured)" in text
    timeline = text[text.index("iteration timeline") :].splitlines()
    assert timeline[4].startswith("    iter 3:") and timeline[4].endswith("(superseded)")
    assert timeline[6].startswith("    iter 5:") and "superseded" not in timeline[6]
    assert "superseded 3,4" in text  # the branch row's note


def test_an_iteration_after_the_revert_becomes_the_best_by_beating_it(mmul: Path) -> None:
    m, final, engine = _reverted_run(mmul, {1: 2.0, 2: 1.0, 3: 0.5, 4: 0.25, 5: 0.8, 6: 0.2})
    assert m.best is not None and m.best.iteration == 6
    assert engine.best is not None and engine.best.iteration == 6  # type: ignore[attr-defined]
    assert final.best is not None and final.best.iteration == 6 and not final.best.superseded
    assert [p.iteration for p in final.branches[0].timeline if p.new_best] == [1, 2, 3, 4, 6]


def test_the_rebuild_marks_superseded_iterations_from_the_manifest(tmp_path: Path) -> None:
    """Without an engine: the marks come from branch.json, the best from every iteration on disk."""
    layout = RunLayout(copy_problem("mmul", tmp_path))
    write_context(layout)
    write_master(layout)
    write_branch(layout, "a", [tuned(2.0), tuned(0.5), tuned(1.0), tuned(1.5)], actions=["continue"] * 4)
    m = read_model(layout.branch("a").manifest, BranchManifest)
    write_model(layout.branch("a").manifest, m.model_copy(update={"superseded": [2, 3], "iterations_done": 2}))
    r = rebuild_final_results(layout)
    assert r.best is not None and (r.best.iteration, r.best.superseded) == (2, True)
    assert r.branches[0].iterations == 2 and r.branches[0].superseded == [2, 3]
    assert json.loads(r.model_dump_json())["best"]["superseded"] is True
    text = render_results(load_results(layout), layout)
    assert "(iteration 2 was superseded by a revert; still the fastest measured)" in text


def test_with_cases_and_no_scored_kernel_best_says_why(tmp_path: Path) -> None:
    """A kernel that failed a case has no score and is not eligible: --best says so, not 'nothing was timed'."""
    layout = RunLayout(copy_problem("mmul", tmp_path))
    write_context(layout, cases=["big", "small"])
    write_master(layout)
    write_branch(layout, "a", [tuned(0.5, score=None)], actions=["stop"])
    r = rebuild_final_results(layout)
    assert r.best is None and r.branches[0].timeline[0].time_ms == 0.5 and r.branches[0].timeline[0].score is None
    text = render_results(load_results(layout), layout)
    assert "best       none: no kernel has a valid result on every case (the score needs them all)" in text
