"""The panes and screens show what the run's files and events say."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console
from scripted_engine import T0, write_final_results, write_run_files
from textual.widget import Widget
from textual.widgets import DataTable, ProgressBar
from ui_helpers import Run, select, settle, start

from cacao_tui.engine import events as ev
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import TuneOutcome
from cacao_tui.ui.app import ResultsApp
from cacao_tui.ui.screens.results import ResultsScreen
from cacao_tui.ui.widgets.best_sparkline import BestSparkline, spark_cells
from cacao_tui.ui.widgets.kernel_pane import KernelPane
from ktt.protocol import Progress


def text_of(widget: Widget) -> str:
    """What a Static or TextLine was last given, as plain text (rich renderables are rendered)."""
    content = widget.content
    if isinstance(content, str):
        return content
    console = Console(width=200, record=True, color_system=None)
    console.print(content)
    return console.export_text()


def cells(table: DataTable) -> list[list[str]]:
    return [[str(c) for c in table.get_row(key)] for key in table.rows]


async def test_tree_shows_branches_iterations_and_parentage(run: Run) -> None:
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        tree = app.main_screen.branch_tree
        assert set(tree._branches) == {"tiled", "vectorized", "tiled-db"}
        assert tree._branches["tiled-db"].parent is tree._branches["tiled"]
        label = str(tree._branches["tiled"].label)
        assert "▶ tiled 2/5 1.20 ms ×3.25" in label
        assert "! vectorized" in str(tree._branches["vectorized"].label)
        assert "iter3 running" in str(tree._iterations[("tiled", 3)].label)


async def test_tree_nodes_are_created_once_and_only_changed_labels_are_set(run: Run) -> None:
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        tree = app.main_screen.branch_tree
        nodes = dict(tree._branches), dict(tree._iterations)
        relabels = tree.relabels
        run.bus.emit(ev.BranchStatusChanged(branch="vectorized", status="failed", max_iter=5, reason="same"))
        for i in range(50):  # log lines never touch labels
            run.bus.emit(ev.LogLine(message=f"line {i}", branch="tiled", iteration=3))
        await settle(pilot)
        assert tree.relabels == relabels  # nothing visible changed
        run.bus.emit(ev.IterationStatusChanged(branch="tiled", iteration=3, status="profiling"))
        await settle(pilot)
        assert tree.relabels == relabels + 1
        assert (dict(tree._branches), dict(tree._iterations)) == nodes
        assert all(a is b for a, b in zip(tree._branches.values(), nodes[0].values(), strict=True))


async def test_details_of_an_iteration_come_from_its_files(run: Run) -> None:
    async with run.app().run_test(size=(140, 45)) as pilot:
        app = await start(pilot, run)
        await select(pilot, "tiled", 2)
        screen = app.main_screen
        kernel = screen.query_one(KernelPane)
        assert "tiled/iter2/kernels.cu" in text_of(kernel.query_one("#kernel-header"))
        assert "__shared__ float As" in text_of(kernel.query_one("#kernel-body"))
        top = cells(screen.query_one("#tuning-top", DataTable))
        assert top[0][:3] == ["1", "1.20 ms", "×3.25"] and top[0][3] == "TILE=16"
        assert len(top) == 3
        assert "launch_failed 1" in text_of(screen.query_one("#tuning-failures"))
        metrics = cells(screen.query_one("#profile-metrics", DataTable))
        dram = next(row for row in metrics if row[1] == "DRAM throughput")
        assert dram[2] == "40 %" and dram[3] == "-33.3%"  # 60 % in iter1 → 40 % in iter2
        assert "compute-bound" in text_of(screen.query_one("#profile-roofline"))
        calls = cells(screen.query_one("#llm-calls", DataTable))
        assert [row[0] for row in calls] == ["plan", "author"] or [row[0] for row in calls] == ["author", "plan"]
        detail = text_of(screen.query_one("#llm-detail"))
        assert "── user ──" in detail and "── response ──" in detail


async def test_first_iteration_of_a_child_branch_diffs_against_its_parent(run: Run) -> None:
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        await select(pilot, "tiled-db", 1)
        await pilot.press("d")
        await settle(pilot)
        header = text_of(app.main_screen.query_one("#kernel-header"))
        assert "diff vs parent tiled/iter2" in header
        body = text_of(app.main_screen.query_one("#kernel-body"))
        assert "+    __shared__ float As[TILE + 1][TILE + 1];" in body


async def test_the_run_selection_shows_master_llm_calls(run: Run) -> None:
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        await select(pilot, None)
        await pilot.press("2")
        await settle(pilot)
        calls = cells(app.main_screen.query_one("#llm-calls", DataTable))
        assert [row[0] for row in calls] == ["analyze"]


async def test_live_tuning_progress_moves_the_bar(run: Run) -> None:
    def progress(evaluated: int, elapsed: float) -> ev.TuningProgress:
        p = Progress(evaluated=evaluated, valid=evaluated, space_size=4, best_ms=0.9, elapsed_s=elapsed, budget_s=20,
                     by_status={"ok": evaluated})  # fmt: skip
        return ev.TuningProgress(branch="tiled", iteration=3, progress=p)

    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        await select(pilot, "tiled", 3)
        bar = app.main_screen.query_one("#tuning-progress", ProgressBar)
        run.bus.emit(progress(3, 15))  # while the Log tab shows: kept, not drawn
        await settle(pilot)
        await pilot.press("4")  # the Tuning tab draws the latest
        await settle(pilot)
        assert bar.total == 20 and bar.progress == 15
        assert "evaluated 3 / 4" in text_of(app.main_screen.query_one("#tuning-counts"))
        run.bus.emit(progress(4, 18))
        await settle(pilot)
        assert bar.progress == 18


async def test_sparkline_shows_best_time_per_iteration_of_the_selected_branch(run: Run) -> None:
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        await select(pilot, "tiled")
        spark = app.main_screen.query_one(BestSparkline)
        assert spark.data == [1.8, 1.2]
        outcome = TuneOutcome(ran=True, best_ms=1.0, speedup=3.9)
        run.bus.emit(ev.TuningFinished(branch="tiled", iteration=3, outcome=outcome))
        await settle(pilot)
        assert spark.data == [1.8, 1.2, 1.0]
        cells = text_of(spark.query_one("#spark")).strip()
        assert cells[0] == "█" and cells[-1] == "▁" and len(set(cells)) == 3  # three heights for three times
        await select(pilot, "vectorized")
        assert spark.data == []


def test_close_times_get_different_heights() -> None:
    """1.29 and 1.21 ms: the sparkline scales from the fastest to the slowest, not from zero."""
    cells = spark_cells([1.29, 1.21, 1.25], 9).plain
    assert cells == "███▁▁▁▅▅▅"


async def test_status_bar_shows_problem_provider_tokens_cost_elapsed_gpus(run: Run) -> None:
    async with run.app().run_test(size=(160, 30)) as pilot:
        app = await start(pilot, run)
        bar = text_of(app.main_screen.query_one("#status"))
        for part in ("mmul", "replay/scripted-model", "20k↑ 5k↓ $0.42", "02:05", "GPU 0", "best 1.20 ms"):
            assert part in bar, part


async def test_log_is_bounded_and_high_rate_lines_are_batched(run: Run) -> None:
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        flushes = app.flushes
        for i in range(12_000):
            run.bus.emit(ev.LogLine(message=f"burst {i}", branch=f"b{i % 16}"))
        await settle(pilot)
        assert app.flushes - flushes <= 3  # one timer flush handles the whole burst
        log = app.main_screen.details.log_pane.log_widget
        assert log.line_count <= log.max_lines
        assert log.lines[-1].endswith("burst 11999")
        assert app.store.total >= 12_000


async def test_seeded_from_disk_when_events_came_before_the_app(tmp_path: Path) -> None:
    run = Run(tmp_path)  # files exist, but no event is ever played
    async with run.app().run_test() as pilot:
        app = await start(pilot, run, play=False)
        assert set(app.view.branches) == {"tiled", "vectorized", "tiled-db"}
        assert app.view.branches["tiled"].best_ms == 1.2
        assert app.view.branches["tiled"].iterations[2].status == "decided"


@pytest.mark.parametrize("size", [(80, 24), (200, 60)])
async def test_every_tab_renders_at_small_and_large_sizes(run: Run, size: tuple[int, int]) -> None:
    async with run.app().run_test(size=size) as pilot:
        app = await start(pilot, run)
        await select(pilot, "tiled", 2)
        for key in "12345":
            await pilot.press(key)
            await settle(pilot)
        assert app.main_screen.branch_tree.region.width >= 26
        assert app.main_screen.details.region.width >= 50


async def test_results_view_reads_final_results(run: Run) -> None:
    write_final_results(run.layout)
    app = ResultsApp(run.layout)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ResultsScreen)
        header = text_of(screen.query_one("#results-header"))
        assert "1.20 ms ×3.25" in header and "from final_results.json" in header
        rows = cells(screen.query_one("#results-branches", DataTable))
        assert [r[0] for r in rows] == ["tiled", "tiled-db", "vectorized"] or rows[0][0] == "tiled"
        assert "__shared__" in text_of(screen.query_one("#results-kernel"))
        await pilot.press("q")
        await pilot.pause()
    assert app.return_value is None


async def test_results_view_without_final_results_still_summarizes(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path / "mmul")
    write_run_files(layout)
    app = ResultsApp(layout)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        header = text_of(app.screen.query_one("#results-header"))
        assert "incomplete run" in header and "rebuilt" in header
        rows = cells(app.screen.query_one("#results-branches", DataTable))
        assert rows[0][0] == "tiled" and rows[0][3] == "1.20 ms"


async def test_results_view_of_an_empty_directory(tmp_path: Path) -> None:
    app = ResultsApp(RunLayout(tmp_path))
    async with app.run_test() as pilot:
        await settle(pilot)
        assert "No results yet" in text_of(app.screen.query_one("#results-header"))


async def test_run_finished_is_announced(run: Run) -> None:
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        run.engine.finish()
        await settle(pilot)
        assert any("Run finished (ok)" in n.message for n in app._notifications)
        assert app.view.phase == "finished"
        assert T0  # the scripted clock


async def test_a_failing_engine_call_is_reported_not_raised(run: Run) -> None:
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        await select(pilot, "tiled")
        await pilot.press("r")  # the fake refuses to retry a running branch
        await settle(pilot)
        assert any("retry: tiled is running" in n.message for n in app._notifications)
        assert app.is_running


async def test_late_subscriber_reads_run_info_from_context_json(tmp_path: Path) -> None:
    from cacao_tui.store.atomic import write_model
    from cacao_tui.store.state import Context, GpuInfo, RunSettings
    from cacao_tui.ui.app import CacaoApp

    run = Run(tmp_path)
    settings = RunSettings(max_iter=5, max_depth=2, n_strategies=2, provider="anthropic", model="m1")
    write_model(run.layout.context, Context(
        problem_name="mmul", problem_dir=str(run.layout.problem_dir), description="", boundary_signature="",
        scalars={}, buffers=[], grid=(1, 1, 1), reference_type="cuda", reference_file="ref_kernel.cu",
        tolerance=1e-4, gpu=GpuInfo(name="H200", indices=[0, 1]), settings=settings, created_at=T0,
    ))  # fmt: skip
    app = CacaoApp(engine=run.engine, bus=run.bus, clock=lambda: T0 + 61)  # no run_info, no events
    async with app.run_test(size=(160, 30)) as pilot:
        await start(pilot, run, play=False)
        bar = text_of(app.main_screen.query_one("#status"))
        assert "mmul" in bar and "anthropic/m1" in bar and "GPU 0,1" in bar and "01:01" in bar


async def test_master_call_records_show_the_system_prompt(run: Run) -> None:
    async with run.app().run_test() as pilot:
        app = await start(pilot, run)
        await select(pilot, None)
        detail = text_of(app.main_screen.query_one("#llm-detail"))
        assert "── system ──" in detail and "You analyze CUDA reference kernels." in detail
        assert "It is compute-bound." in detail
