"""Pictures: the best-time history, per-case bars, the roofline (math and the Profile tab), and the
results export to CSV and Markdown."""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from ui_helpers import settle

from cacao_tui.store.atomic import write_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.results import FROM_FILE, LoadedResults
from cacao_tui.store.results_export import ExportError, export_results, render_csv, render_markdown
from cacao_tui.store.state import BestResult, BranchSummary, CaseOutcome, FinalResults, IterationPoint
from cacao_tui.ui.app import ResultsApp
from cacao_tui.ui.plots.cases import case_bars_draw
from cacao_tui.ui.plots.history import history_draw, history_series
from cacao_tui.ui.plots.plot_view import PlotView, render_figure
from cacao_tui.ui.plots.results_pictures import ResultsPictures
from cacao_tui.ui.plots.roofline import roofline_draw, roofline_of
from cacao_tui.ui.widgets.profile_pane import ProfilePane
from ktt.protocol import FloorReport, KernelProfile, Metric, ProfileReport


def _branch(name: str, times: list[float | None]) -> BranchSummary:
    points = [IterationPoint(iteration=i + 1, status="decided", time_ms=t) for i, t in enumerate(times)]
    timed = [t for t in times if t is not None]
    return BranchSummary(
        name=name, title=name, status="done", iterations=len(times), best_ms=min(timed) if timed else None,
        timeline=points,
    )  # fmt: skip


def _results() -> LoadedResults:
    cases = [
        CaseOutcome(name="small", status="ok", time_ms=0.5, reference_ms=1.0, reference_source="measured", speedup=2.0),
        CaseOutcome(name="odd|big", status="ok", time_ms=2.0, reference_ms=3.0, speedup=1.5, config={"TM": 16}),
    ]
    r = FinalResults(
        problem_name="saxpy",
        reference_ms=1.2,
        reference_source="measured",
        cases=["small", "odd|big"],
        best=BestResult(
            branch="tiled",
            iteration=3,
            time_ms=0.5,
            speedup=2.4,
            score=1.73,
            config={"TM": 16},
            kernel_path="branches/tiled/iter3/kernels.cu",
            cases=cases,
        ),
        branches=[_branch("tiled", [1.8, None, 0.5]), _branch("vector\x1b[31m", [2.0, 2.5]), _branch("dead", [None])],
    )
    return LoadedResults(r, FROM_FILE, [])


def test_history_is_the_best_so_far_per_branch() -> None:
    series = history_series(_results().results.branches)  # type: ignore[union-attr]
    assert [(s.name, s.iterations, s.best_ms) for s in series] == [
        ("tiled", [1, 3], [1.8, 0.5]),
        ("vector\x1b[31m", [1, 2], [2.0, 2.0]),  # never rises; a branch with no timed iteration has no line
    ]
    text = render_figure(history_draw(series, 1.2, 0.3), 70, 16, color=False)  # type: ignore[arg-type]
    assert "best time so far per branch" in text and "iteration" in text
    # The legend sits under the plot, not over it: its line is below the x axis's label.
    lines = text.splitlines()
    assert len(lines) == 16  # the figure and its legend in the rows given, the legend not cut off
    assert lines[-1].split() == ["━━", "tiled", "━━", "vector\\x1b[31m", "··", "reference", "1.2", "ms", "··", "floor",
                                 "0.3", "ms"]  # fmt: skip
    assert lines.index(next(line for line in lines if "iteration" in line)) < len(lines) - 1


def test_the_history_is_a_step_line() -> None:
    """Best so far: level until an iteration beats it, then straight down (not a diagonal)."""
    from cacao_tui.ui.plots.history import steps

    assert steps([1, 3, 4], [1.8, 0.5, 0.5]) == ([1, 3, 3, 4, 4], [1.8, 1.8, 0.5, 0.5, 0.5])


def test_bars_have_values_and_round_ticks() -> None:
    from cacao_tui.ui.plots.cases import nice_ticks

    assert nice_ticks(7.7) == [0, 2, 4, 6, 8]  # not 0.0 2.1 4.3 6.4
    assert nice_ticks(2.4) == [0, 0.5, 1, 1.5, 2, 2.5]
    cases = [CaseOutcome(name="small", status="ok", speedup=6.4), CaseOutcome(name="big", status="ok", speedup=1.5)]
    text = render_figure(case_bars_draw(cases), 60, 10, color=False)  # type: ignore[arg-type]
    assert "×6.4" in text and "×1.5" in text
    axis = next(line for line in text.splitlines() if line.strip().startswith("0 "))
    assert axis.split() == ["0", "2", "4", "6", "8"]


def test_history_uses_a_log_axis_when_a_slow_reference_would_flatten_the_branches() -> None:
    series = history_series(_results().results.branches)  # type: ignore[union-attr]  # 0.5 .. 2.0 ms
    near = render_figure(history_draw(series, 1.2), 70, 16, color=False)  # type: ignore[arg-type]
    far = render_figure(history_draw(series, 30.0), 70, 16, color=False)  # type: ignore[arg-type]
    assert "log scale" not in near and "log scale" in far
    # On the log axis the 0.5 and 1.8 ms bests of "tiled" land rows apart, not both on the bottom one;
    # each branch's last best is labelled where its step line ends.
    lines = far.splitlines()
    top = next(i for i, line in enumerate(lines) if "2 ms│" in line)
    bottom = next(i for i, line in enumerate(lines) if "0.5 ms│" in line)
    assert bottom - top >= 3


def test_case_bars_and_roofline_draw_only_with_data() -> None:
    loaded = _results()
    draw = case_bars_draw(loaded.results.best.cases)  # type: ignore[union-attr]
    text = render_figure(draw, 60, 10, color=False)  # type: ignore[arg-type]
    assert "small" in text and "speedup per case" in text
    assert case_bars_draw([CaseOutcome(name="a", status="no_valid")]) is None
    assert history_draw([]) is None


def _kernel(**metrics: float) -> KernelProfile:
    return KernelProfile(
        kernel="sgemm",
        launch_index=0,
        metrics=[Metric(name=k, label=k, section="x", value=v, unit="") for k, v in metrics.items()],
        duration_ms=2.0,
    )


GEMM = {
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 4e9,
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": 1e8,
    "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum": 1e8,
    "dram__bytes_read.sum": 3e8,
    "dram__bytes_write.sum": 1e8,
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": 5.0,
}


def test_roofline_math_and_where_the_roofs_come_from() -> None:
    floor = FloorReport(bandwidth_gbs=4000.0, peak_gflops=60000.0)
    r = roofline_of(_kernel(**GEMM), floor)
    assert r.flops == pytest.approx(8.2e9)
    assert r.bytes == pytest.approx(4e8)
    assert r.intensity == pytest.approx(20.5)
    assert r.achieved_gflops == pytest.approx(4100.0)  # 8.2e9 flops in 2 ms
    assert r.ridge == pytest.approx(15.0)
    assert r.bound() == "compute roof"
    assert r.fraction_of_roof() == pytest.approx(4100 / 60000)
    assert "tuner: measured copy bandwidth" in r.sources()
    # NCU's own peaks win over the tuner's figures.
    ncu = roofline_of(
        _kernel(**GEMM, **{"dram__bytes.sum.peak_sustained": 1000.0, "dram__cycles_elapsed.avg.per_second": 3e9}),
        floor,
    )
    assert ncu.bandwidth_gbs == pytest.approx(3000.0) and ncu.bandwidth_from == "NCU peak"
    # Without either, bandwidth is estimated from NCU's DRAM fraction: 200 GB/s achieved at 5 %.
    alone = roofline_of(_kernel(**GEMM), None)
    assert alone.bandwidth_gbs == pytest.approx(4000.0) and alone.bandwidth_from.startswith("NCU: achieved")
    # No FP32 counts: nothing to place.
    bare = roofline_of(_kernel(**{"dram__bytes_read.sum": 1e6}), floor)
    assert bare.intensity is None and roofline_draw(bare) is None
    text = render_figure(roofline_draw(r), 60, 16, color=False)  # type: ignore[arg-type]
    assert "roofline" in text and "arithmetic intensity" in text


class _ProfileApp(App[None]):
    def compose(self) -> ComposeResult:
        yield ProfilePane()


async def test_profile_tab_shows_the_roofline() -> None:
    report = ProfileReport(ok=True, kernels=[_kernel(**GEMM)], config={"TM": 16})
    app = _ProfileApp()
    async with app.run_test(size=(100, 40)) as pilot:
        pane = app.query_one(ProfilePane)
        pane.show("tiled/iter2", report, None, None, None, FloorReport(bandwidth_gbs=4000.0, peak_gflops=60000.0))
        await pilot.pause(0.1)
        plot = app.query_one("#profile-roofline-plot", PlotView)
        assert plot.display
        line = str(app.query_one("#profile-roofline").render())
        assert "20.5 flop/B" in line and "compute roof" in line and "measured copy bandwidth" in line
        assert "roofline" in str(plot.render())
        # A profile without the counts: no plot, and the reason in one line.
        pane.show("tiled/iter3", ProfileReport(ok=True, kernels=[_kernel(x=1.0)]), None, None, None)
        await pilot.pause(0.1)
        assert not plot.display
        assert "no roofline" in str(app.query_one("#profile-roofline").render())


class _PicturesApp(App[None]):
    def compose(self) -> ComposeResult:
        yield ResultsPictures()


async def test_results_pictures_follow_the_results() -> None:
    app = _PicturesApp()
    async with app.run_test(size=(120, 30)) as pilot:
        pictures = app.query_one(ResultsPictures)
        pictures.show(LoadedResults(None, "", []))
        await pilot.pause(0.05)
        assert not pictures.display
        pictures.show(_results())
        await pilot.pause(0.1)
        assert pictures.display
        history = str(app.query_one("#results-history", PlotView).render())
        assert "best time so far" in history
        assert "speedup per case" in str(app.query_one("#results-case-bars", PlotView).render())


def test_export_csv_and_markdown(tmp_path: Path) -> None:
    loaded = _results()
    layout = RunLayout(tmp_path)
    rows = list(csv.DictReader(io.StringIO(render_csv(loaded))))
    assert [r["table"] for r in rows].count("branch") == 3
    cases = [r for r in rows if r["table"] == "case"]
    assert [(c["case"], c["speedup"], c["config"]) for c in cases] == [
        ("small", "2.0", ""),
        ("odd|big", "1.5", "TM=16"),
    ]
    assert [r["iteration"] for r in rows if r["table"] == "iteration" and r["branch"] == "tiled"] == ["1", "2", "3"]
    assert all("\x1b" not in v for r in rows for v in r.values())  # names from run files are escaped
    md = render_markdown(loaded, layout)
    assert "**Best:** 0.5 ms (2.4× over the reference), score 1.73" in md
    assert "| odd\\|big | ok |" in md  # a pipe in a name does not break the table
    assert "## Iterations" in md
    out = export_results(loaded, layout, tmp_path / "r.md")
    assert out.read_text() == md
    export_results(loaded, layout, tmp_path / "r.csv")
    assert (tmp_path / "r.csv").read_text().startswith("table,branch,case")
    with pytest.raises(ExportError, match=r"name a \.csv or \.md file"):
        export_results(loaded, layout, tmp_path / "r.txt")
    with pytest.raises(ExportError, match="no such directory"):
        export_results(loaded, layout, tmp_path / "missing" / "r.md")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.csv", "r.md"]  # no temp files left


def test_roofline_snapshot(snap_compare) -> None:
    report = ProfileReport(ok=True, kernels=[_kernel(**GEMM)], config={"TM": 16})

    async def before(pilot) -> None:
        pilot.app.query_one(ProfilePane).show(
            "tiled/iter2", report, None, None, None, FloorReport(bandwidth_gbs=4000.0, peak_gflops=60000.0)
        )
        await pilot.pause(0.2)

    assert snap_compare(_ProfileApp(), terminal_size=(100, 36), run_before=before)


def test_results_pictures_snapshot(snap_compare) -> None:
    async def before(pilot) -> None:
        pilot.app.query_one(ResultsPictures).show(_results())
        await pilot.pause(0.2)

    assert snap_compare(_PicturesApp(), terminal_size=(120, 20), run_before=before)


def _results_dir() -> RunLayout:
    """The pictures' results in a run directory at a fixed path (the view shows paths)."""
    from ui_helpers import FIXED_ROOT

    layout = RunLayout(FIXED_ROOT / "results-with-cases" / "saxpy")
    shutil.rmtree(layout.problem_dir.parent, ignore_errors=True)
    layout.output.mkdir(parents=True)
    write_model(layout.final_results, _results().results)  # type: ignore[arg-type]
    return layout


async def test_results_view_at_80x24_scrolls_to_the_pictures() -> None:
    """Taller than 24 rows: Tab moves from the branch table to the pictures and the view follows."""
    app = ResultsApp(_results_dir())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        pictures = app.screen.query_one(ResultsPictures)
        view = app.screen.query_one("#results")
        assert view.scroll_offset.y == 0 and pictures.region.bottom > app.screen.size.height
        await pilot.press("tab")
        await settle(pilot)
        assert app.focused is pictures and view.scroll_offset.y > 0
        assert pictures.region.y >= 0 and pictures.region.bottom <= app.screen.size.height - 1  # above the footer


async def test_the_pictures_take_the_room_there_is() -> None:
    """14 rows at 80x24, 40 % of a 60-row terminal (they stayed at 14, leaving the rest empty)."""
    for (width, height), rows in (((80, 24), 14), ((200, 60), 24)):
        app = ResultsApp(_results_dir())
        async with app.run_test(size=(width, height)) as pilot:
            await settle(pilot)
            assert app.screen.query_one(ResultsPictures).size.height == rows, (width, height)


def test_results_view_80x24_snapshot(snap_compare) -> None:
    async def before(pilot) -> None:
        await settle(pilot)
        await pilot.press("tab")
        await settle(pilot)

    assert snap_compare(ResultsApp(_results_dir()), terminal_size=(80, 24), run_before=before)
