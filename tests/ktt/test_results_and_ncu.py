from __future__ import annotations

import json
from pathlib import Path

from ktt_paths import DATA

from ktt.ncu import (
    CATALOGUE,
    kernel_base_name,
    parse_raw_csv,
    permission_error,
    profile_command,
    roofline_class,
    unknown_metrics,
)
from ktt.protocol import ConfigResult, Metric, TuneSummary
from ktt.results import ResultsWriter, read_results, write_json_atomic

RAW = DATA / "ncu" / "raw_mmul_h200.csv"


def test_results_stream_and_survive_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    with ResultsWriter(path) as w:
        for i in range(3):
            w.append(ConfigResult(index=i, config={"B": i}, status="ok", time_ms=1.0 + i))
    with path.open("a") as f:
        f.write('{"type": "config", "index": 3, "conf')  # a crash mid-write
    rows = read_results(path)
    assert [r.index for r in rows] == [0, 1, 2] and rows[2].time_ms == 3.0
    assert read_results(tmp_path / "absent.jsonl") == []


def test_atomic_json(tmp_path: Path) -> None:
    s = TuneSummary(
        ok=False,
        problem="p",
        kernel_file="k",
        spec_file="s",
        space_size=1,
        evaluated=0,
        valid=0,
        strategy="auto",
        seed=0,
        wall_s=0.0,
        results_file="r",
    )
    write_json_atomic(tmp_path / "sub" / "summary.json", s)
    assert json.loads((tmp_path / "sub" / "summary.json").read_text())["problem"] == "p"
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["summary.json"]


def test_recorded_ncu_csv_parses_into_a_typed_table() -> None:
    (k,) = parse_raw_csv(RAW.read_text())
    assert k.kernel == "mmul_tiled" and k.launch_index == 0
    assert k.duration_ms is not None and 0.3 < k.duration_ms < 1.0
    by = {m.name: m for m in k.metrics}
    assert len([m for m in k.metrics if isinstance(m.value, float)]) >= 20
    assert {m.section for m in k.metrics} >= {"speed_of_light", "memory", "occupancy", "launch", "warp_stalls"}
    assert [m.name for m in k.metrics] == [m.name for m in CATALOGUE if m.name in by]
    assert by["gpu__time_duration.sum"].unit == "ms"
    assert by["sm__cycles_elapsed.avg.per_second"].unit == "GHz"
    assert 1.0 < by["sm__cycles_elapsed.avg.per_second"].value < 2.5  # type: ignore[operator]
    assert by["launch__registers_per_thread"].value == 127.0
    assert k.roofline == "memory-bound"
    everything = parse_raw_csv(RAW.read_text(), all_metrics=True)[0]
    assert len(everything.metrics) > 200


def metric(name: str, value: float) -> Metric:
    return Metric(name=name, label=name, section="speed_of_light", value=value, unit="%")


def test_roofline_classes() -> None:
    sol = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
    mem = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
    assert roofline_class({sol: metric(sol, 85.0), mem: metric(mem, 30.0)}) == "compute-bound"
    assert roofline_class({sol: metric(sol, 20.0), mem: metric(mem, 90.0)}) == "memory-bound"
    assert roofline_class({sol: metric(sol, 20.0), mem: metric(mem, 30.0)}) == "latency-bound"
    assert roofline_class({}) == "unknown"


def test_ncu_messages_and_command() -> None:
    assert permission_error("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission")
    assert unknown_metrics("==ERROR== Failed to find metric sm__bogus.sum") == ["sm__bogus.sum"]
    assert kernel_base_name("void sgemm<8>(float const*, float*)") == "sgemm"
    assert kernel_base_name("mmul_tiled") == "mmul_tiled"
    cmd = profile_command("ncu", ["python", "app"], ["k2", "k1"], 2, 2, ["a", "b"], "/tmp/x")
    assert cmd[cmd.index("--kernel-name") + 1] == "regex:^(k1|k2)$"
    assert cmd[cmd.index("--clock-control") + 1] == "none" and cmd[-2:] == ["python", "app"]
    assert cmd[cmd.index("--launch-skip") + 1] == "2" and cmd[cmd.index("--metrics") + 1] == "a,b"
