"""The compute peak a problem's ``physical_floor.flops`` are measured against, per GPU.

``physical_floor.flops_dtype`` names the arithmetic the flops are done in: ``fp32`` (the default)
is the CUDA-core FP32 FMA peak (peak_gflops: from the SM count and clock); the others
are the dense tensor-core peaks, which a bf16 GEMM needs (it runs some 15 times faster than the
FP32 cores allow, so its flops against the FP32 peak would flag every good kernel as suspect):

1. the device's datasheet, for the parts in ``DATASHEET`` (H100 SXM, H200 SXM);
2. otherwise the architecture's dense rate per SM and clock (``FLOPS_PER_SM_CLOCK``, the fastest
   part of the architecture, so the floor is never above what the device can do) times the
   device's SMs and reported clock; fp64 without a rate: the FP32 peak (no NVIDIA GPU computes
   fp64 faster than fp32);
3. otherwise none: the flop term is left out of the floor (the bytes still count) and the tuner
   says so. A floor is a guard against impossible times: a peak too high only weakens it, one
   too low would condemn honest kernels, so an unknown part gets none rather than a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FLOPS_DTYPES = ("fp32", "fp64", "tf32", "bf16", "fp16", "fp8")
NAMES = {
    "fp32": "FP32 CUDA-core",
    "fp64": "FP64",
    "tf32": "TF32 dense tensor-core",
    "bf16": "BF16 dense tensor-core",
    "fp16": "FP16 dense tensor-core",
    "fp8": "FP8 dense tensor-core",
}


FP32_LANES_PER_SM = {
    "sm_70": 64, "sm_72": 64, "sm_75": 64, "sm_80": 64, "sm_86": 128, "sm_87": 128, "sm_89": 128,
    "sm_90": 128, "sm_100": 128, "sm_101": 128, "sm_103": 128, "sm_110": 128, "sm_120": 128, "sm_121": 128,
}  # fmt: skip


@dataclass(frozen=True)
class Datasheet:
    label: str
    arch: str
    sm_count: int
    name: re.Pattern[str]  # matched against the device name the driver reports
    tflops: dict[str, float]  # dense peaks, by flops dtype


DATASHEET = (
    # NVIDIA H100 / H200 SXM datasheets (dense: half the "with sparsity" figures). The NVL and PCIe
    # parts are slower (the rule below covers them).
    Datasheet(
        "H100/H200 SXM",
        "sm_90",
        132,
        re.compile(r"\bH[12]00\b(?!.*\b(NVL|PCIe)\b)", re.IGNORECASE),
        {"fp64": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9},
    ),
)
# Dense operations per SM per clock (an FMA is 2) of each architecture's tensor cores (fp64: FP64
# tensor cores; int8 counts integer operations). The fastest part of each architecture: sm_86/sm_89
# at the A40/L40S rates, which GeForce parts halve with fp32 accumulation; a floor against them is
# never above what the device can do. The one table of these rates: the tuner's floor and the
# agent's device table (ktt.device_table) both read it.
FLOPS_PER_SM_CLOCK: dict[str, dict[str, int]] = {
    "sm_70": {"fp16": 1024},
    "sm_75": {"fp16": 1024, "int8": 2048},
    "sm_80": {"fp64": 128, "tf32": 1024, "bf16": 2048, "fp16": 2048, "int8": 4096},
    "sm_86": {"tf32": 512, "bf16": 1024, "fp16": 1024, "int8": 2048},
    "sm_89": {"tf32": 512, "bf16": 1024, "fp16": 1024, "fp8": 2048, "int8": 2048},
    "sm_90": {"fp64": 256, "tf32": 2048, "bf16": 4096, "fp16": 4096, "fp8": 8192, "int8": 8192},
    "sm_100": {"fp64": 256, "tf32": 4096, "bf16": 8192, "fp16": 8192, "fp8": 16384, "int8": 16384},
}
# FP64 operations per SM per clock on the CUDA cores (an FMA is 2).
FP64_CUDA_FLOPS_PER_SM_CLOCK = {
    "sm_70": 64, "sm_75": 4, "sm_80": 64, "sm_86": 4, "sm_89": 4, "sm_90": 128, "sm_100": 128,
}  # fmt: skip


@dataclass(frozen=True)
class Peak:
    gflops: float | None
    dtype: str
    source: str  # where the figure comes from, or why there is none


def peak_gflops(arch: str, sm_count: int, clock_khz: int) -> float | None:
    """FP32 FMA peak from the SM count and boost clock: lanes x 2 flops x SMs x clock."""
    lanes = FP32_LANES_PER_SM.get(arch.rstrip("af"))
    if lanes is None:
        return None
    return lanes * 2 * sm_count * clock_khz * 1e3 / 1e9


def flops_peak(dtype: str, device: str, arch: str, sm_count: int, clock_khz: int) -> Peak:
    """The ``dtype`` peak of one device (module docstring for the rules)."""
    family = arch.rstrip("af")  # sm_90a runs on an sm_90 device
    fp32 = peak_gflops(family, sm_count, clock_khz)
    clock = f"{sm_count} SMs x {clock_khz / 1e3:.0f} MHz"
    if dtype == "fp32":
        return Peak(fp32, dtype, f"FP32 lanes x 2 x {clock}" if fp32 else f"no FP32 lane count for {family}")
    for sheet in DATASHEET:
        if family == sheet.arch and sm_count == sheet.sm_count and sheet.name.search(device) and dtype in sheet.tflops:
            return Peak(sheet.tflops[dtype] * 1e3, dtype, f"{sheet.label} datasheet, dense")
    rate = FLOPS_PER_SM_CLOCK.get(family, {}).get(dtype)
    if rate is not None:
        gflops = rate * sm_count * clock_khz * 1e3 / 1e9
        return Peak(gflops, dtype, f"{family}: {rate} flops per SM per clock x {clock}")
    if dtype == "fp64" and fp32:
        return Peak(fp32, dtype, "the FP32 peak (an upper bound of fp64)")
    return Peak(None, dtype, f"no {NAMES[dtype]} peak known for {family} (ktt/peaks.py): the flops are not used")


def datasheet_peaks(dtype: str) -> list[tuple[str, float]]:
    """(part, TFLOP/s) of the datasheet peaks known for ``dtype`` (fp32 has none: it is computed)."""
    return [(s.label, s.tflops[dtype]) for s in DATASHEET if dtype in s.tflops]


def peak_rates(arch: str, sm_count: int, clock_mhz: float) -> list[tuple[str, str, float]]:
    """(dtype, unit, TFLOP/s) of every dense peak known for an architecture, from its SMs and clock:
    the CUDA cores' fp32 and fp64, then the tensor cores' (int8 in TOP/s)."""
    family = arch.rstrip("af")
    per_clock: list[tuple[str, str, int]] = []
    if family in FP32_LANES_PER_SM:
        per_clock.append(("fp32", "CUDA cores", 2 * FP32_LANES_PER_SM[family]))
    if family in FP64_CUDA_FLOPS_PER_SM_CLOCK:
        per_clock.append(("fp64", "CUDA cores", FP64_CUDA_FLOPS_PER_SM_CLOCK[family]))
    per_clock += [(dtype, "tensor cores", ops) for dtype, ops in FLOPS_PER_SM_CLOCK.get(family, {}).items()]
    return [(dtype, unit, round(ops * sm_count * clock_mhz * 1e6 / 1e12, 2)) for dtype, unit, ops in per_clock]
