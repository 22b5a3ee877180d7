"""What a review (propose) shows of its measurements: found missing or wrong by the trials' players
(docs/agent_trials.md, 2026-12-02 transpose and multipass_sum)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from cacao_tui.nodes.briefing import best_section
from cacao_tui.nodes.context import SourceFiles
from cacao_tui.nodes.landscape import edge_note
from cacao_tui.nodes.profile import dram_line, profile_text, timing_line
from cacao_tui.nodes.tuner_output import summary_lines
from cacao_tui.settings import DEFAULTS
from cacao_tui.store.state import BestResult
from ktt.protocol import FloorReport, KernelProfile, Metric, ProfileReport, TuneSummary


def test_a_zero_one_switch_at_its_value_is_no_edge() -> None:
    assert edge_note("PAD", 1, [0, 1]) == ""
    assert edge_note("STREAMING", 0, [0, 1]) == ""
    assert "UPPER EDGE" in edge_note("TILE", 64, [16, 32, 64])
    assert "UPPER EDGE" in edge_note("UNROLL", 2, [1, 2])  # a range, not a switch


def _view(best_iteration: int, files: SourceFiles | None) -> SimpleNamespace:
    best = BestResult(branch="b1", iteration=best_iteration, time_ms=0.0712, kernel_path="k.cu")
    return SimpleNamespace(
        name="b1", iteration=2, best=best, best_files=files, start=SimpleNamespace(iteration=1), mode="change"
    )


def test_a_review_never_prints_the_best_files_again_when_they_are_the_ones_shown() -> None:
    deps = SimpleNamespace(settings=SimpleNamespace(dry_run=False), defaults=DEFAULTS)
    current = SourceFiles(kernel="__global__ void k() {}\n", spec="P: [1]\n", label="iteration 2")
    same = SourceFiles(kernel=current.kernel, spec=current.spec, label="iteration 1")
    text = best_section(deps, _view(1, same), current)  # type: ignore[arg-type]
    assert "differ" not in text and "same as this iteration's" in text and "__global__" not in text
    text = best_section(deps, _view(2, same), current)  # type: ignore[arg-type]
    assert "this iteration" in text and "__global__" not in text
    other = SourceFiles(kernel="__global__ void k2() {}\n", spec="P: [2]\n", label="iteration 1")
    text = best_section(deps, _view(1, other), current)  # type: ignore[arg-type]
    assert "differ from the current ones" in text and "k2()" in text


def _report(durations: list[tuple[str, int, float]]) -> ProfileReport:
    kernels = [
        KernelProfile(
            kernel=name,
            launch_index=i,
            duration_ms=ms,
            metrics=[Metric(name="gpu__time_duration.sum", label="duration", section="sol", value=ms, unit="ms")],
        )
        for name, i, ms in durations
    ]
    return ProfileReport(ok=True, kernels=kernels)


def test_a_kernel_launched_twice_is_compared_launch_by_launch(tmp_path: Path) -> None:
    (tmp_path / "iter1").mkdir()
    (tmp_path / "iter2").mkdir()
    then = _report([("pass", 0, 0.0180), ("pass", 1, 0.0026)])
    now = _report([("pass", 0, 0.0183), ("pass", 1, 0.0024)])
    (tmp_path / "iter1" / "profile.json").write_text(then.model_dump_json())
    (tmp_path / "iter2" / "profile.json").write_text(now.model_dump_json())
    branch = SimpleNamespace(it=SimpleNamespace(profile=tmp_path / "iter2" / "profile.json"))
    outcome = SimpleNamespace(ran=True, diagnosis=None, message=None)
    deps = SimpleNamespace(device=None)  # no measured device table: no DRAM-traffic line
    text = profile_text(deps, branch, outcome, (1, tmp_path / "iter1" / "profile.json"), 0.0232)  # type: ignore[arg-type]
    assert "duration: 0.0183 ms; was 0.018, +2%" in text
    assert "duration: 0.0024 ms; was 0.0026, -8%" in text
    assert "+598%" not in text and "0.0026, +" not in text


def test_the_tuners_time_is_set_against_the_kernels_durations() -> None:
    line = timing_line(0.07122, [0.06422])
    assert "0.07122 ms" in line and "0.06422 ms" in line and "7.0 us" in line and "10 %" in line
    assert timing_line(0.0232, [0.0183, 0.0024]).count("us") == 1
    assert timing_line(None, [0.05]) == "" and timing_line(0.05, [0.04, None]) == ""


def test_the_floor_line_says_where_its_bandwidth_comes_from() -> None:
    summary = TuneSummary.model_validate(
        {"ok": True, "problem": "t", "kernel_file": "k", "spec_file": "s", "device": "H200", "arch": "sm_90",
         "space_size": 1, "restricted_size": 1, "evaluated": 1, "valid": 1, "strategy": "exhaustive", "seed": 0,
         "wall_s": 1.0, "results_file": "r.jsonl"}
    )  # fmt: skip
    summary.floor = FloorReport(bytes=268e6, bandwidth_gbs=4148.2, floor_ms=0.06471, fraction_of_floor=0.91)
    floor = next(line for line in summary_lines(summary) if line.startswith("physical floor"))
    assert "4,148 GB/s" in floor and "measured afresh in each tuning run" in floor


def test_the_dram_traffic_is_set_against_the_measured_copy_bandwidth() -> None:
    def kernel(ms: float, read: float, written: float) -> KernelProfile:
        metrics = [
            Metric(name="dram__bytes_read.sum", label="read", section="memory", value=read, unit="byte"),
            Metric(name="dram__bytes_write.sum", label="written", section="memory", value=written, unit="byte"),
        ]
        return KernelProfile(kernel="k", launch_index=0, duration_ms=ms, metrics=metrics)

    line = dram_line([kernel(0.064224, 134228736.0, 111283456.0)], 4148.0)
    assert "245.5 MB" in line and "3,823 GB/s" in line and "92% of the copy bandwidth" in line
    assert dram_line([kernel(0.06, 1e8, 1e8)], None) == ""  # no measured table: no line
    assert dram_line([kernel(0.06, 1e8, 1e8), KernelProfile(kernel="k2", launch_index=1)], 4000.0) == ""
