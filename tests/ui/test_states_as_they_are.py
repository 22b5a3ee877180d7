"""States as they are (issue 30): the branch count rises with each decided iteration, a dry run's
Tuning tab says it tuned nothing, and a dry run's status bar shows no GPU figure. On the FAKE
scripted engine's run (tests/ui/scripted_engine.py)."""

from __future__ import annotations

from scripted_engine import T0, run_started, write_final_results
from test_screens import text_of
from textual.widgets import ProgressBar
from ui_helpers import Run, select, settle, start

from cacao_tui.engine import events as ev
from cacao_tui.store.atomic import read_model, write_model
from cacao_tui.store.state import FinalResults, IterState, TuneOutcome
from cacao_tui.ui.app import CacaoApp, ResultsApp
from cacao_tui.ui.widgets.status_bar import StatusBar

DRY = "dry run: not run on a GPU; 8/8 sampled configurations compiled"


def dry_app(run: Run) -> CacaoApp:
    info = run_started(run.layout).model_copy(update={"dry_run": True, "gpu_name": None})
    return CacaoApp(engine=run.engine, bus=run.bus, run_info=info, clock=lambda: T0 + 125)  # type: ignore[arg-type]


async def test_a_dry_runs_tuning_tab_says_not_tuned_and_waits_for_nothing(run: Run) -> None:
    it = run.layout.branch("tiled").iteration(4)  # a dry run's decided iteration: compile-checked only
    it.root.mkdir(parents=True)
    write_model(it.state, IterState(branch="tiled", index=4, status="decided",
                                    run=TuneOutcome(ran=False, compiled=8, message=DRY)))  # fmt: skip
    async with dry_app(run).run_test(size=(140, 45)) as pilot:
        app = await start(pilot, run)
        run.bus.emit(ev.IterationStatusChanged(branch="tiled", iteration=4, status="decided"))
        await settle(pilot)
        await select(pilot, "tiled", 4)
        await pilot.press("4")
        await settle(pilot)
        screen = app.main_screen
        counts = text_of(screen.query_one("#tuning-counts"))
        assert counts.startswith("not tuned (dry run): dry run: not run on a GPU; 8/8"), counts
        assert "waiting" not in counts and "evaluated" not in counts
        assert "not tuned (dry run)" in text_of(screen.query_one("#tuning-header"))
        assert not screen.query_one("#tuning-progress", ProgressBar).display
        # The live event of the same step says the same.
        run.bus.emit(ev.TuningFinished(branch="tiled", iteration=4, outcome=TuneOutcome(ran=False, message=DRY)))
        await settle(pilot)
        assert text_of(screen.query_one("#tuning-counts")).startswith("not tuned (dry run)")


async def test_a_dry_runs_status_bar_has_no_gpu_figure(run: Run) -> None:
    async with dry_app(run).run_test(size=(200, 30)) as pilot:
        app = await start(pilot, run)
        bar = app.main_screen.query_one(StatusBar).bar_text(400).plain
        assert "dry-run" in bar and "GPU" not in bar, bar
    async with run.app().run_test(size=(200, 30)) as pilot:  # a run on a GPU keeps its figure
        app = await start(pilot, run, play=False)
        assert "GPU 0" in app.main_screen.query_one(StatusBar).bar_text(400).plain


async def test_the_tree_counts_an_iteration_as_soon_as_it_is_decided(run: Run) -> None:
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        tree = app.main_screen.branch_tree
        assert " tiled 2/5 " in str(tree._branches["tiled"].label)
        # The engine announces the count with each decision (engine/worker.py: apply).
        run.bus.emit(ev.DecisionMade(branch="tiled", iteration=3, action="continue", reason="more"))
        run.bus.emit(ev.BranchStatusChanged(branch="tiled", status="running", iteration=None, iterations_done=3,
                                            max_iter=5))  # fmt: skip
        await settle(pilot)
        assert " tiled 3/5 " in str(tree._branches["tiled"].label)
        await select(pilot, "tiled")
        assert "3/5 iterations" in text_of(app.main_screen.query_one("#selection-header"))


async def test_the_results_view_says_the_runs_verdict_and_the_references_calls(run: Run) -> None:
    write_final_results(run.layout)
    saved = read_model(run.layout.final_results, FinalResults)
    write_model(run.layout.final_results, saved.model_copy(update={
        "run_status": "failed", "run_message": "every step was refused by the model; no kernel was written",
        "reference_samples": 3, "reference_min_ms": 3.0, "reference_max_ms": 5.2,
    }))  # fmt: skip
    app = ResultsApp(run.layout)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        header = " ".join(text_of(app.screen.query_one("#results-header")).split())
        assert "run failed: every step was refused by the model; no kernel was written" in header
        assert "median of 3 calls, 3 to 5.2 ms" in header, header
        assert "warning: the reference's 3 timed calls spread" in header
