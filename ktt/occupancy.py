"""What a compiled kernel uses (registers, spills, shared memory) and the occupancy that allows.

The resource figures come from ptxas's verbose report (``-Xptxas=-v``, which NVRTC passes on
and writes into the program log); nothing runs on a GPU. The occupancy is the CUDA occupancy
calculation: resident blocks per SM are the fewest that any of the four limits allows
(registers, shared memory, warps, blocks), with each architecture's limits and allocation
granularities (the CUDA programming guide's table of compute capabilities). The device table
a run measures (``ktt device``) has the same limits for the GPU at hand.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from ktt.protocol import KernelResources, LaunchOccupancy


@dataclass(frozen=True)
class ArchLimits:
    max_warps_per_sm: int
    max_blocks_per_sm: int
    regs_per_sm: int
    smem_per_sm: int  # bytes a kernel's blocks may share on one SM (the largest carve-out)
    smem_per_block_optin: int
    reserved_smem_per_block: int  # what the system keeps per resident block
    reg_unit: int = 256  # registers are allocated per warp in units of this many
    smem_unit: int = 128
    max_regs_per_thread: int = 255


KIB = 1024
ARCH_LIMITS: dict[str, ArchLimits] = {
    "sm_70": ArchLimits(64, 32, 65536, 96 * KIB, 96 * KIB, 0, smem_unit=256),
    "sm_75": ArchLimits(32, 16, 65536, 64 * KIB, 64 * KIB, 0, smem_unit=256),
    "sm_80": ArchLimits(64, 32, 65536, 164 * KIB, 163 * KIB, KIB),
    "sm_86": ArchLimits(48, 16, 65536, 100 * KIB, 99 * KIB, KIB),
    "sm_87": ArchLimits(48, 16, 65536, 164 * KIB, 163 * KIB, KIB),
    "sm_89": ArchLimits(48, 24, 65536, 100 * KIB, 99 * KIB, KIB),
    "sm_90": ArchLimits(64, 32, 65536, 228 * KIB, 227 * KIB, KIB),
    "sm_100": ArchLimits(64, 32, 65536, 228 * KIB, 227 * KIB, KIB),
    "sm_120": ArchLimits(48, 32, 65536, 128 * KIB, 99 * KIB, KIB),
}


def limits_for(arch: str) -> ArchLimits | None:
    """The limits of ``sm_90a``, ``sm_90`` ... (the feature suffix does not change them)."""
    return ARCH_LIMITS.get(arch.rstrip("af"))


_ENTRY = re.compile(r"Compiling entry function '([^']+)' for")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


def parse_ptxas_log(log: str) -> list[KernelResources]:
    """One entry per kernel ptxas compiled (``ptxas info : Compiling entry function 'k' ...``)."""
    out: list[KernelResources] = []
    for line in log.splitlines():
        m = _ENTRY.search(line)
        if m:
            out.append(KernelResources(kernel=m.group(1)))
            continue
        if not out:
            continue
        r = out[-1]
        f = _FRAME.search(line)
        if f:
            r.stack_bytes, r.spill_stores, r.spill_loads = (int(x) for x in f.groups())
        u = _USED.search(line)
        if u:
            r.registers = int(u.group(1))
            s = _SMEM.search(line)
            r.smem_static = int(s.group(1)) if s else 0
    return [r for r in out if r.registers is not None]


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def occupancy(
    kernel: str, registers: int, smem_static: int, smem_dynamic: int, threads: int, limits: ArchLimits
) -> LaunchOccupancy:
    """Resident blocks and warps per SM for one launch, and which limit binds."""
    warps = max(1, -(-threads // 32))
    regs_per_warp = _round_up(max(1, registers) * 32, limits.reg_unit)
    by = {
        "warps": limits.max_warps_per_sm // warps,
        "blocks": limits.max_blocks_per_sm,
        "registers": (limits.regs_per_sm // regs_per_warp) // warps,
    }
    smem = smem_static + smem_dynamic
    if smem:
        per_block = _round_up(smem, limits.smem_unit) + limits.reserved_smem_per_block
        by["shared memory"] = limits.smem_per_sm // per_block if smem <= limits.smem_per_block_optin else 0
    blocks = min(by.values())
    # The limit that binds; "warps" (the SM's thread limit) wins a tie, since then no resource is
    # short: a block of 256 threads at 32 registers fits 8 times by warps and by registers alike.
    binding = [k for k in ("warps", "blocks", "registers", "shared memory") if by.get(k) == blocks]
    limiter = "warps" if "warps" in binding else " and ".join(binding)
    return LaunchOccupancy(
        kernel=kernel,
        threads=threads,
        registers=registers,
        smem_bytes=smem,
        blocks_per_sm=blocks,
        warps_per_sm=blocks * warps,
        occupancy=round(blocks * warps / limits.max_warps_per_sm, 4),
        limiter=limiter,
    )


def launch_occupancy(launches: Iterable[dict], resources: list[KernelResources], arch: str) -> list[LaunchOccupancy]:
    """The occupancy of each distinct (kernel, block, shared memory) launch of a program."""
    limits = limits_for(arch)
    if limits is None:
        return []
    by_kernel = {r.kernel: r for r in resources}
    seen: set[tuple] = set()
    out = []
    for launch in launches:
        r = by_kernel.get(launch["kernel"])
        if r is None or r.registers is None:
            continue
        threads = math.prod(int(d) for d in launch["block"])
        key = (launch["kernel"], threads, int(launch.get("smem") or 0))
        if key in seen:
            continue
        seen.add(key)
        o = occupancy(launch["kernel"], r.registers, r.smem_static or 0, key[2], threads, limits)
        grid = launch.get("grid")
        out.append(o.model_copy(update={"grid_blocks": math.prod(int(d) for d in grid) if grid else None}))
    return out
