"""Issue 21's ktt side on the CPU: the profile as a diagnosis (recorded H200 output), ptxas's
resource report and the occupancy it allows (real NVRTC, no GPU), the mismatch samples of a
failed validation, and the validate command's choice of configuration."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from ktt_paths import ROOT

from ktt.check import check_kernel
from ktt.diagnosis import diagnose, diagnosis_lines, stall_shares
from ktt.mismatch import describe, first_mismatches
from ktt.ncu import parse_details_csv, parse_raw_csv, parse_source_csv
from ktt.occupancy import limits_for, occupancy, parse_ptxas_log
from ktt.problem import load_problem
from ktt.protocol import RuleFinding, SourceHotspot

DATA = Path(__file__).parent / "data" / "ncu"


def recorded() -> list:
    return parse_raw_csv((DATA / "raw_mmul_h200.csv").read_text())


def test_the_stalls_are_ranked_by_share_and_the_limiter_named() -> None:
    k = recorded()[0]
    shares = stall_shares(k.metrics)
    assert [s.reason for s in shares[:2]] == ["short_scoreboard", "long_scoreboard"]
    assert abs(sum(s.share for s in shares) - 1.0) < 1e-3 and "not_selected" not in {s.reason for s in shares}
    d = diagnose(k)
    assert d.occupancy_limiter == "registers" and d.achieved_occupancy_pct == pytest.approx(24.37)
    assert [b.name for b in d.bottlenecks] == ["short scoreboard stalls", "memory pipeline throughput"]
    lines = diagnosis_lines(d)
    assert lines[0].startswith("bottleneck 1: short scoreboard stalls — 62% of stall cycles")


def test_a_rule_finding_with_its_estimate_leads_the_diagnosis() -> None:
    k = recorded()[0]
    k.findings = [RuleFinding(rule="UncoalescedSharedAccess", section="MemoryWorkloadAnalysis", kind="OPT",
                              text="shared loads have 4-way bank conflicts", speedup_pct=48.0)]  # fmt: skip
    k.hotspots = [SourceHotspot(file="kernels.cu", line=42, share=0.6, source="acc += As[k][ty] * Bs[k][tx];")]
    d = diagnose(k)
    assert d.bottlenecks[0].name == "UncoalescedSharedAccess" and d.bottlenecks[0].estimated_speedup_pct == 48.0
    assert "Nsight Compute estimates 48% faster if fixed" in diagnosis_lines(d)[0]


# Synthetic CSV written here with the column names of Nsight Compute's details and source pages
# (not recorded from a device): the parsers key on the names, so extra columns do not matter.
DETAILS_ROWS = [
    ["ID", "Process ID", "Kernel Name", "Section Name", "Metric Name", "Metric Unit", "Metric Value", "Rule Name",
     "Rule Type", "Rule Description", "Estimated Speedup Type", "Estimated Speedup"],
    ["0", "1", "mmul_tiled", "Occupancy", "Achieved Occupancy", "%", "24.37", "", "", "", "", ""],
    ["0", "1", "mmul_tiled", "Occupancy", "", "", "", "AchievedOccupancy", "OPT",
     "The achieved occupancy is limited by registers.", "global", "18.5"],
    ["0", "1", "mmul_tiled", "MemoryWorkloadAnalysis", "", "", "", "SharedBankConflicts", "OPT",
     "Shared loads have 2-way bank conflicts.", "local", "31.2"],
    ["1", "1", "mmul_tiled", "SpeedOfLight", "", "", "", "SOLBottleneck", "WRN",
     "Memory is more heavily utilized than compute.", "", ""],
]  # fmt: skip
DETAILS = "\n".join(",".join(f'"{cell}"' for cell in row) for row in DETAILS_ROWS) + "\n"
SOURCE = '''"#","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)"
"1","extern ""C"" __global__ void k(","0","0"
"3","    acc += a * b;","300","250"
"4","    out[i] = acc;","100","90"
'''


def test_the_details_page_gives_each_launchs_findings_largest_first() -> None:
    launches = parse_details_csv(DETAILS)
    assert [f.rule for f in launches[0]] == ["SharedBankConflicts", "AchievedOccupancy"]
    assert launches[0][0].speedup_pct == 31.2 and launches[0][0].speedup_type == "local"
    assert launches[1][0].speedup_pct is None and launches[1][0].kind == "WRN"
    assert parse_details_csv("not csv at all") == []


def test_the_source_page_gives_the_lines_with_most_stall_samples() -> None:
    source = 'extern "C" __global__ void k(\n{\n    acc += a * b;\n    out[i] = acc;\n'
    spots = parse_source_csv(SOURCE, source)
    assert [(h.line, h.share) for h in spots] == [(3, 0.75), (4, 0.25)]
    assert spots[0].source == "acc += a * b;"
    assert parse_source_csv('"Address","SASS"\n"0x0","NOP"\n', source) == []


def test_ptxas_reports_registers_spills_and_shared_memory() -> None:
    log = (
        "ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
        "ptxas info    : Function properties for k\n"
        "ptxas         .     256 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
        "ptxas info    : Used 40 registers, used 1 barriers, 256 bytes cumulative stack size, 1024 bytes smem\n"
    )
    (r,) = parse_ptxas_log(log)
    assert (r.kernel, r.registers, r.spill_stores, r.spill_loads, r.stack_bytes, r.smem_static) == (
        "k", 40, 8, 12, 256, 1024)  # fmt: skip
    h100 = limits_for("sm_90a")
    assert h100 is not None
    o = occupancy("k", registers=128, smem_static=0, smem_dynamic=0, threads=256, limits=h100)
    assert (o.blocks_per_sm, o.occupancy, o.limiter) == (2, 0.25, "registers")  # 128 regs x 256 threads
    o = occupancy("k", registers=32, smem_static=48 * 1024, smem_dynamic=0, threads=128, limits=h100)
    assert (o.blocks_per_sm, o.limiter) == (4, "shared memory")  # 228 KiB / (48 KiB + 1 KiB)


def test_a_compile_check_reports_resources_and_occupancy_per_sampled_configuration(compile_cache: Path) -> None:
    problem = load_problem(ROOT / "problems" / "mmul")
    demo = ROOT / "problems" / "mmul" / "demo"
    report = check_kernel(problem, (demo / "3_regblock.cu").read_text(), demo / "3_regblock.yaml", sample=2,
                          arch="sm_90", cache_dir=compile_cache)  # fmt: skip
    assert report.ok
    for c in report.configs:
        (r,) = c.resources
        assert r.kernel == "mmul_regblock" and r.registers and r.smem_static and c.binary_sha256
        (o,) = c.occupancy
        assert o.threads == c.config["BM"] * c.config["BN"] // (c.config["TM"] * c.config["TN"])
        assert 0 < o.occupancy <= 1 and o.limiter in ("registers", "shared memory", "warps", "blocks")


def test_mismatches_name_the_first_bad_elements() -> None:
    expected = np.arange(20, dtype=np.float32)
    got = expected.copy()
    got[3], got[7], got[8] = 0.0, np.nan, 8.5
    found = first_mismatches(expected, got, offset=100, tolerance=0.1)
    assert [(m.index, m.expected, m.got) for m in found] == [(103, 3.0, 0.0), (107, 7.0, None), (108, 8.0, 8.5)]
    assert describe(found) == "[103] expected 3 got 0; [107] expected 7 got NaN/Inf; [108] expected 8 got 8.5"
    ints = first_mismatches(np.array([1, 2, 3]), np.array([1, 5, 3]), 0, 0)
    assert [(m.index, m.expected, m.got) for m in ints] == [(1, 2, 5)]
    assert len(first_mismatches(np.zeros(100), np.ones(100), 0, 0.5)) == 8


def test_validate_runs_the_configuration_asked_for_or_the_first(tmp_path: Path) -> None:
    from ktt.validate_one import ValidateOptions, choose_key, parse_config, validate

    demo = ROOT / "problems" / "mmul" / "demo"
    opts = ValidateOptions(problem_dir=ROOT / "problems" / "mmul", kernel=demo / "2_tiled.cu",
                           spec=demo / "2_tiled.yaml", output=tmp_path / "v")  # fmt: skip
    from ktt.tune import TuneOptions
    from ktt.validate_one import OneConfig

    runner = OneConfig(TuneOptions(problem_dir=opts.problem_dir, kernel=opts.kernel, spec=opts.spec,
                                   output=opts.output), lambda _: None)  # fmt: skip
    runner.load()
    search = runner.searches[0]
    key, why = choose_key(search, None)
    assert why is None and key == search.keys[0]
    assert choose_key(search, {"TILE": 16, "PAD": 1})[0] is not None
    assert "unknown parameter(s) NOPE" in (choose_key(search, {"TILE": 16, "PAD": 1, "NOPE": 1})[1] or "")
    assert "not in the tuning space" in (choose_key(search, {"TILE": 7, "PAD": 1})[1] or "")
    runner.close()
    assert parse_config('{"TILE": 16}') == {"TILE": 16}
    with pytest.raises(ValueError):
        parse_config("[1, 2]")
    report, code = validate(opts)  # no GPU here: one line, the environment's exit code
    assert code == 3 and not report.ok and "no CUDA device" in (report.message or "")
    json.loads(report.model_dump_json())


def test_the_source_page_of_ncu_2025_3_gives_the_hotspots() -> None:
    """The page as ncu 2025.3 wrote it on the H200 (``--print-source cuda,sass``, mmul_tiled of
    problems/mmul/demo/2_tiled.cu): File Path and Function Name rows, then each source line summed
    over its SASS rows. The first session's parser read "File Path" as the header and found nothing."""
    text = (DATA / "source_cuda_sass_mmul_tiled_h200.csv").read_text()
    source = (ROOT / "problems" / "mmul" / "demo" / "2_tiled.cu").read_text()
    spots = parse_source_csv(text, source, "2_tiled.cu")
    assert len(spots) == 5 and all(h.file == "2_tiled.cu" for h in spots)
    assert spots == sorted(spots, key=lambda h: -h.share) and 0 < sum(h.share for h in spots) <= 1
    lines = source.splitlines()
    assert all(h.source == lines[h.line - 1].strip()[:200] and h.source for h in spots)
    assert any("__syncthreads" in h.source or "+=" in h.source for h in spots), spots


def test_a_header_block_and_split_quotes_do_not_shift_the_lines() -> None:
    """Lines of an included header are not the kernel's; an unescaped quote in ncu's source cell
    (``extern "C" k(a, b)`` splits at the comma) leaves the metric columns read from the right."""
    page = (
        '"File Path","/w/inputs.hpp"\n"Function Name","k"\n'
        '"Line No","Source","Address","Source","Warp Stall Sampling (All Samples)","# Samples"\n'
        '"2","#define N 4","-","-","900","900"\n'
        '"File Path","/w/shapes/default/kernels.cu"\n"Function Name","k"\n'
        '"Line No","Source","Address","Source","Warp Stall Sampling (All Samples)","# Samples"\n'
        '"1","extern "C" __global__ void k(float* a, float* b) {","-","-","10","10"\n'
        '"","","0x0","      LDC R1, c[0x0][0x28]","10","10"\n'
        '"3","    acc += a * b;","-","-","30","30"\n'
    )
    source = 'extern "C" __global__ void k(float* a, float* b) {\n{\n    acc += a * b;\n'
    spots = parse_source_csv(page, source, "mine.cu")
    assert [(h.line, h.share) for h in spots] == [(3, 0.75), (1, 0.25)]
