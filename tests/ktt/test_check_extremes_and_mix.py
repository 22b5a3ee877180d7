"""``ktt check`` on the CPU (NVRTC, no GPU), issue 28: the sample always holds the extremes of the
space, named configurations are checked (and refused with a reason), each extreme's instruction mix
is read from its cubin (SASS through nvdisasm, a dependency; NVRTC's PTX for an install without it), SM_COUNT reaches
kernels and expressions, and the occupancy limit is named for what binds."""

from __future__ import annotations

from pathlib import Path

import pytest
from ktt_paths import DATA

from ktt import instruction_mix
from ktt.check import check_kernel
from ktt.occupancy import ARCH_LIMITS, occupancy
from ktt.problem import load_problem

# Y[i] = the norm of a vector of ITEMS values per element: an inner loop of FFMAs, then one root.
KERNEL = r"""
#include "inputs.hpp"
extern "C" __global__ void vecnorm(const float* __restrict__ X, float* __restrict__ Y) {
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < ITEMS; ++k) {
        float v = X[(i + k * 7) % N];
        acc = fmaf(v, v, acc);
    }
#if APPROX
    float r;
    asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(acc));
    Y[i] = r;
#else
    Y[i] = sqrtf(acc);
#endif
}
"""
SPEC = """
tune_params:
  BLOCK: [32, 64, 128, 256]
  ITEMS: [3, 5, 9]
  APPROX: [0]
launches:
  - kernel: vecnorm
    grid: {x: "ceil_div(N, BLOCK)"}
    block: {x: BLOCK}
"""


@pytest.fixture(scope="module")
def tiny():  # type: ignore[no-untyped-def]
    return load_problem(DATA / "tiny")


def check(problem, source: str = KERNEL, spec: str = SPEC, cache: Path | None = None, **kw):  # type: ignore[no-untyped-def]
    return check_kernel(problem, source, spec, arch="sm_90", cache_dir=cache, **kw)


def primary(report):  # type: ignore[no-untyped-def]
    return [c for c in report.configs if c.shape == report.configs[0].shape]


def test_the_sample_always_holds_the_extremes_of_the_space(tiny, compile_cache: Path) -> None:  # type: ignore[no-untyped-def]
    report = check(tiny, cache=compile_cache, sample=1)
    assert report.ok, report.message
    by_role = {r: c.config for c in primary(report) for r in c.roles}
    # The largest values of every parameter, and the smallest: whatever the random draw.
    assert by_role["largest parameter values"] == {"BLOCK": 256, "ITEMS": 9, "APPROX": 0}
    assert by_role["smallest parameter values"] == {"BLOCK": 32, "ITEMS": 3, "APPROX": 0}
    # sample=4 adds random ones on top of the extremes, never fewer than the extremes.
    wider = check(tiny, cache=compile_cache, sample=4)
    roles = [r for c in primary(wider) for r in c.roles]
    assert roles.count("sampled") == 2 and "largest parameter values" in roles and len(primary(wider)) == 4


def test_the_extremes_of_dynamic_shared_memory(tiny, compile_cache: Path) -> None:  # type: ignore[no-untyped-def]
    spec = SPEC.replace("    block: {x: BLOCK}", '    block: {x: BLOCK}\n    shared_mem: "(64 / BLOCK + 1) * 1024"')
    report = check(tiny, spec=spec, cache=compile_cache, sample=1)
    by_role = {r: c.config["BLOCK"] for c in primary(report) for r in c.roles}
    assert by_role["most dynamic shared memory"] == 32 and by_role["least dynamic shared memory"] in (128, 256)


def test_named_configurations_are_checked_and_the_wrong_ones_refused(tiny, compile_cache: Path) -> None:  # type: ignore[no-untyped-def]
    named = [
        {"BLOCK": 64, "ITEMS": "5", "APPROX": 0},  # "5" names the value 5
        {"BLOCK": 64, "ITEMS": 5},  # APPROX missing
        {"BLOCK": 48, "ITEMS": 5, "APPROX": 0},  # not a value of BLOCK
        {"BLOCK": 64, "ITEMS": 5, "APPROX": 0, "TILE": 2},  # no such parameter
    ]
    report = check(tiny, cache=compile_cache, sample=1, configs=named)
    asked = [c for c in report.configs if "requested" in c.roles]
    assert [c.config for c in asked] == [{"BLOCK": 64, "ITEMS": 5, "APPROX": 0}] and asked[0].ok
    errors = " | ".join(report.requested_errors)
    assert "no value for APPROX" in errors and "BLOCK=48 is not one of its values" in errors
    assert "unknown parameter 'TILE'" in errors
    restricted = SPEC.replace("launches:", "restrictions:\n  - BLOCK * ITEMS <= 1000\nlaunches:")
    report = check(
        tiny, spec=restricted, cache=compile_cache, sample=1, configs=[{"BLOCK": 256, "ITEMS": 9, "APPROX": 0}]
    )
    assert report.requested_errors == ["BLOCK=256, ITEMS=9, APPROX=0: excluded by the restrictions"]
    many = [{"BLOCK": 32, "ITEMS": 3, "APPROX": 0}] * 8
    assert (
        "8 configurations named; the first 6 are checked"
        in check(tiny, cache=compile_cache, configs=many).requested_errors
    )


def _mix(report, config: dict):  # type: ignore[no-untyped-def]
    (found,) = [c for c in report.configs if c.config == config and c.instruction_mix]
    (kernel,) = found.instruction_mix
    return found, kernel


def test_the_nvdisasm_dependency_is_found() -> None:
    """nvidia-cuda-nvdisasm is one of cacao's dependencies: ktt finds the wheel's binary (a toolkit's
    nvdisasm on PATH would come first), so the mix is SASS unless KTT_DISASSEMBLER=none."""
    wheel = instruction_mix._wheel_tool("nvdisasm")
    assert wheel is not None, "nvidia-cuda-nvdisasm is not installed: pip install -e . installs it"
    found = instruction_mix.disassembler()
    assert found is not None and found[0] == "nvdisasm"


def test_the_instruction_mix_from_the_cubin_shows_an_approximate_root(tiny, compile_cache: Path) -> None:  # type: ignore[no-untyped-def]
    largest = {"BLOCK": 256, "ITEMS": 9, "APPROX": 0}
    exact = check(tiny, cache=compile_cache, sample=1, configs=[largest])
    fast = check(tiny, spec=SPEC.replace("APPROX: [0]", "APPROX: [1]"), cache=compile_cache, sample=1,
                 configs=[{**largest, "APPROX": 1}])  # fmt: skip
    _, exact_mix = _mix(exact, largest)
    _, fast_mix = _mix(fast, {**largest, "APPROX": 1})
    assert exact_mix.isa == fast_mix.isa == "SASS"
    # IEEE sqrtf: a MUFU.RSQ and a correction sequence of FFMAs; sqrt.approx: one MUFU.SQRT.
    assert fast_mix.mix.detail.get("MUFU:MUFU.SQRT") == 1 and "MUFU:MUFU.SQRT" not in exact_mix.mix.detail
    assert exact_mix.mix.counts["MUFU"] >= 1 and exact_mix.mix.counts["FFMA"] > fast_mix.mix.counts["FFMA"]
    assert exact_mix.mix.counts["LDG"] >= 9 and exact_mix.mix.counts["STG"] >= 1  # the loop is unrolled: 9 loads


def test_without_a_disassembler_the_mix_comes_from_ptx(tiny, compile_cache: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("KTT_DISASSEMBLER", "none")
    spec = SPEC.replace("APPROX: [0]", "APPROX: [1]")
    largest = {"BLOCK": 256, "ITEMS": 9, "APPROX": 1}
    report = check(tiny, spec=spec, cache=compile_cache, sample=1, configs=[largest, {**largest, "BLOCK": 64}])
    found, kernel = _mix(report, largest)
    assert kernel.isa == "PTX" and found.mix_note == "PTX (NVRTC's virtual ISA, before ptxas): KTT_DISASSEMBLER=none"
    assert kernel.mix.detail.get("MUFU:sqrt.approx.ftz.f32") == 1 and kernel.mix.counts["FFMA"] == 9
    # At most two configurations are read this way (each is one more compile): the others say why not.
    (smallest,) = [c for c in report.configs if "smallest parameter values" in c.roles]
    assert not smallest.instruction_mix and smallest.mix_note == (
        "no instruction mix: KTT_DISASSEMBLER=none (PTX is read for 2 configurations)"
    )


def test_the_main_loop_is_the_one_that_computes() -> None:
    """A listing with a copy loop and a compute loop nested in an outer loop: the compute loop is the main one."""
    listing = "\n".join(
        [
            "        .text.k:",
            "        /*0000*/                   LDG.E R1, desc[UR4][R2.64] ;",
            ".L_x_1:",
            "        /*0010*/                   LDG.E.128 R4, desc[UR4][R2.64] ;",
            "        /*0020*/                   STS.128 [R0], R4 ;",
            "        /*0030*/              @P0 BRA `(.L_x_1) ;",
            ".L_x_2:",
            "        /*0040*/                   LDS R5, [R0] ;",
            "        /*0050*/                   FFMA R6, R5, R5, R6 ;",
            "        /*0060*/                   FFMA R7, R5, R6, R7 ;",
            "        /*0070*/                   MUFU.RSQ R8, R7 ;",
            "        /*0080*/              @P1 BRA `(.L_x_2) ;",
            "        /*0090*/                   EXIT ;",
            ".L_x_3:",
            "        /*00a0*/                   BRA `(.L_x_3);",
        ]
    )
    (k,) = instruction_mix.kernel_mixes(instruction_mix.parse_sass(listing))
    assert k.name == "k" and k.mix.counts["FFMA"] == 2 and k.mix.detail["MUFU:MUFU.RSQ"] == 1
    assert k.mix.detail["LDG:LDG.128"] == 1 and k.mix.detail["STS:STS.128"] == 1
    assert k.loop is not None and k.loop.own.counts["FFMA"] == 2 and k.loop.own.counts.get("LDG", 0) == 0


def test_sm_count_reaches_kernels_and_expressions(tiny, compile_cache: Path) -> None:  # type: ignore[no-untyped-def]
    source = KERNEL.replace(
        "int i = blockIdx.x * BLOCK", 'static_assert(SM_COUNT == 132, "SM_COUNT");\n    int i = blockIdx.x * BLOCK'
    )
    spec = SPEC.replace('grid: {x: "ceil_div(N, BLOCK)"}', 'grid: {x: "max(ceil_div(N, BLOCK), SM_COUNT)"}')
    report = check(tiny, source=source, spec=spec, cache=compile_cache, sample=1)
    assert report.ok and report.sm_count == 132, report.message  # sm_90: the H200's 132 SMs
    other = check(tiny, source=source, spec=spec, cache=compile_cache, sample=1, sm_count=114)
    assert not other.ok and "SM_COUNT" in (other.message or "") and other.sm_count == 114


def test_a_grid_of_few_waves_says_how_many(tiny, compile_cache: Path) -> None:  # type: ignore[no-untyped-def]
    """Two trials' players asked for the waves of a grid beside its occupancy: said where a grid makes
    fewer than FEW_WAVES waves (a ragged last wave costs there), from the launch's own grid."""
    import re

    from cacao_tui.nodes.compile_check import format_report

    report = check(tiny, cache=compile_cache, sm_count=2)  # 2 SMs: N = 1024 makes a few waves
    assert report.ok, report.message
    lines = [line for line in format_report(report, KERNEL).splitlines() if "blocks/SM" in line]
    assert lines
    for line in lines:
        block = int(re.search(r"BLOCK=(\d+)", line).group(1))  # type: ignore[union-attr]
        per_sm = int(re.search(r"-> (\d+) blocks/SM", line).group(1))  # type: ignore[union-attr]
        grid = -(-(512 if "[shape half]" in line else 1024) // block)  # the case half: N = 512
        waves = grid / (per_sm * 2)
        said = f", grid = {waves:.2f} waves"
        assert (said in line) == (waves < 4), (line, said)
    many = check(tiny, cache=compile_cache)  # 132 SMs: far under a wave, said too
    assert "waves" in format_report(many, KERNEL)


def test_occupancy_names_what_binds() -> None:
    h = ARCH_LIMITS["sm_90"]
    full = occupancy("k", 32, 0, 0, 256, h)  # 8 blocks by warps and by registers alike: nothing is short
    assert full.occupancy == 1.0 and full.limiter == "warps"
    regs = occupancy("k", 128, 0, 0, 256, h)
    assert regs.limiter == "registers" and regs.blocks_per_sm == 2
    both = occupancy("k", 64, 0, 56 * 1024, 256, h)  # 4 blocks by registers and by shared memory
    assert both.blocks_per_sm == 4 and both.limiter == "registers and shared memory"


def test_compile_errors_are_counted_and_mapped_to_lines(tiny, compile_cache: Path) -> None:  # type: ignore[no-untyped-def]
    from cacao_tui.nodes.compile_check import format_report

    broken = KERNEL.replace("acc = fmaf(v, v, acc);", "acc = fmaf(v, w, acc);")
    report = check(tiny, source=broken, cache=compile_cache, sample=3)
    assert not report.ok
    text = format_report(report, broken)
    line = broken.splitlines().index("        acc = fmaf(v, w, acc);") + 1
    n = len(report.configs)
    assert f'kernels.cu:{line}: error: identifier "w" is undefined ×{n} (in {n} of {n} configurations)' in text
    assert "\n    acc = fmaf(v, w, acc);" in text  # the source line under it
    assert text.count('identifier "w" is undefined') == 1  # once, however many configurations failed


def test_the_worker_summarises_the_reference_output(tmp_path: Path) -> None:
    """summary.json's reference_stats: min, max and mean |x| of each validated reference output."""
    import numpy as np

    from ktt.workdir import WorkDir
    from ktt.worker import Session

    problem = load_problem(DATA / "tiny")
    work = WorkDir(tmp_path)
    path = work.reference_file("default", 0, "Y")
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, np.array([-2.0, 0.5, np.nan, 1.5], dtype=np.float32))
    me = type("S", (), {"problem": problem, "work": work})()
    (stats,) = Session._reference_stats(me, problem.primary, 0)  # type: ignore[arg-type]
    assert stats == {"buffer": "Y", "count": 4, "nonfinite": 1, "min": -2.0, "max": 1.5, "mean_abs": 4.0 / 3}


def test_the_hopper_example_shows_its_tma_and_wgmma_in_sass(compile_cache: Path) -> None:
    """The shipped gemm_bf16 example, checked on the CPU: each extreme's SASS holds its HGMMA ops with
    their shape and types and its TMA loads (what only a GPU run showed before nvdisasm was a dependency)."""
    root = Path(__file__).resolve().parents[2] / "problems" / "gemm_bf16"
    problem = load_problem(root)
    example = root / "example"
    report = check_kernel(
        problem, (example / "kernels.cu").read_text(), example / "tuning.yaml", arch="sm_90", sample=1,
        cache_dir=compile_cache,
    )  # fmt: skip
    assert report.ok, report.message
    mixes = [m for c in report.configs for m in c.instruction_mix]
    assert len(mixes) >= 2 and {m.isa for m in mixes} == {"SASS"}
    for m in mixes:
        assert m.mix.counts.get("tensor", 0) > 0 and m.mix.counts.get("TMA", 0) > 0, m.mix.counts
        assert any(d.startswith("tensor:HGMMA.64x") and d.endswith(".F32.BF16") for d in m.mix.detail), m.mix.detail
