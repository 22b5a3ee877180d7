"""What the views say once a run has ended without every branch finishing: a stop (the engine
leaves its branches "running" on disk for --resume), a killed branch, a run process that died
before or after its first event. Nothing may still read running, waiting or starting."""

from __future__ import annotations

import asyncio
from pathlib import Path

from scripted_engine import REFERENCE_MS, T0
from test_screens import text_of
from ui_helpers import Run, select, settle, start

from cacao_tui.engine import events as ev
from cacao_tui.store.atomic import write_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.results import load_results, render_results
from cacao_tui.store.state import BranchSummary, FinalResults
from cacao_tui.ui.run_view import Selection
from cacao_tui.ui.widgets.status_bar import StatusBar


def _labels(app: object) -> dict[object, str]:
    tree = app.main_screen.branch_tree  # type: ignore[attr-defined]
    out: dict[object, str] = {name: str(node.label) for name, node in tree._branches.items()}
    out.update({key: str(node.label) for key, node in tree._iterations.items()})
    return out


async def test_a_stopped_run_reads_interrupted_not_running(run: Run) -> None:
    async with run.app().run_test(size=(120, 40)) as pilot:
        app = await start(pilot, run)
        await select(pilot, "tiled", 3)
        await pilot.press("4")
        await settle(pilot)
        assert "iter3 running" in _labels(app)[("tiled", 3)]
        # The real engine's stop: the run ends interrupted; the branch files still say running.
        run.bus.emit(ev.RunFinished(ts=T0 + 900, status="interrupted", message="stopped; continue with --resume",
                                    best_ms=1.2, speedup=REFERENCE_MS / 1.2, best_branch="tiled"))  # fmt: skip
        await settle(pilot)
        app.main_screen._reload_if_stale()
        await settle(pilot)
        labels = _labels(app)
        assert labels["tiled"].startswith("■ tiled") and "▶" not in labels["tiled"]
        assert "iter3 interrupted" in labels[("tiled", 3)]
        assert "iter1 interrupted" in labels[("tiled-db", 1)]
        assert "! vectorized" in labels["vectorized"]  # a failed branch stays failed
        assert "running" not in "".join(labels.values())
        counts = text_of(app.main_screen.query_one("#tuning-counts"))
        assert counts.startswith("interrupted") and "waiting" not in counts
        assert not app.main_screen.query_one("#tuning-progress").display
        assert "interrupted" in text_of(app.main_screen.query_one("#selection-header"))


async def test_a_killed_branchs_iteration_reads_killed(run: Run) -> None:
    async with run.app().run_test(size=(120, 40)) as pilot:
        app = await start(pilot, run)
        assert "iter1 implementing" in _labels(app)[("tiled-db", 1)]
        run.bus.emit(ev.BranchStatusChanged(branch="tiled-db", status="killed", max_iter=5, reason="killed"))
        await settle(pilot)
        labels = _labels(app)
        assert labels["tiled-db"].startswith("✗ tiled-db")
        assert "iter1 killed" in labels[("tiled-db", 1)]
        assert "iter3 running" in labels[("tiled", 3)]  # the others go on


def test_the_results_of_a_stopped_run_list_no_branch_as_running(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path / "mmul")
    branches = [BranchSummary(name="b1", title="one", status="running", iterations=2),
                BranchSummary(name="b2", title="two", status="done", iterations=3)]  # fmt: skip
    write_model(layout.final_results, FinalResults(problem_name="mmul", complete=False, branches=branches))
    loaded = load_results(layout)
    table = render_results(loaded, layout)
    row = next(line for line in table.splitlines() if "  b1" in line)
    assert "interrupted" in row and "running" not in row
    assert "done" in next(line for line in table.splitlines() if "  b2" in line)


async def test_a_run_view_whose_process_died_stops_its_clock(tmp_path: Path) -> None:
    """An attached view of a run whose process is gone and whose log has no end: it says so (its
    clock stops, nothing reads starting); the same for one that failed before its first event."""
    from cacao_tui.ui.home.attach import AttachApp

    problem = tmp_path / "mmul"
    (problem / "output").mkdir(parents=True)
    (problem / "problem.yaml").write_text("name: mmul\n")
    (problem / "output" / "launch.log").write_text("== started from the app\ncacao: no NVIDIA GPU found\n")
    app = AttachApp(problem, poll_interval=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        for _ in range(50):
            await settle(pilot)
            if app.view.ended_at is not None:
                break
        bar = app.main_screen.query_one(StatusBar)
        assert "failed to start" in bar.bar_text(100).plain
        first = bar.bar_text(100).plain
        await asyncio.sleep(1.1)
        assert bar.bar_text(100).plain == first  # the clock has stopped
        log = "\n".join(app.store.lines(Selection()))  # the launch log's last lines
        assert "no NVIDIA GPU found" in log
