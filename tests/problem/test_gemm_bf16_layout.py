"""The index arithmetic of the gemm_bf16 Hopper kernel, checked on the CPU (no GPU needed).

The part of problems/gemm_bf16/example/kernels.cu between "LAYOUT BEGIN" and "LAYOUT END" (the
shared-memory offsets, the TMA copies' coordinates, the wgmma descriptors, the accumulator
fragment map, the tile order, the barrier parities) is compiled with the host C++ compiler for
a set of configurations and run; this test drives it with a model of the hardware written from
the PTX ISA and the CUDA programming guide, independently of the kernel:

- a TMA copy of a box (innermost extent b0, b1 rows) writes row r of the box at r * b0 * 2 bytes
  past its destination, and with a swizzle of S bytes (32, 64, 128) the 16-byte chunk bits 4..
  of each address are XORed with its bits 7.. (S/16 - 1 of them), the pattern repeating every
  8 * S bytes (the destination is aligned to that);
- wgmma reads a K-major operand from a matrix descriptor: start address (bits 0-13, >> 4), SBO
  (bits 32-45, >> 4), base offset (bits 49-51), swizzle mode (bits 62-63: 1 = 128B, 2 = 64B,
  3 = 32B); element (row m, k) of a k16 step is at start + (m / 8) * SBO + (m % 8) * S + 2k,
  swizzled as above;
- the .f32 accumulator of m64nNk16: warp w of the warpgroup holds rows 16w..16w+15; lane l
  holds, in each block of 8 columns j, the registers 4j..4j+3 at (l/4, 2(l%4)), (l/4, 2(l%4)+1),
  (l/4+8, 2(l%4)), (l/4+8, 2(l%4)+1).

The model then multiplies a small integer matrix pair through the kernel's own layout, tile by
tile, k-tile by k-tile, and the result must equal A @ B exactly; every C element is written
once, every copy lands inside its stage, no two copies overlap, and the bytes each CTA's stage
receives equal what its full barrier expects.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

from ktt.expressions import Expression

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "problems" / "gemm_bf16" / "example"
KERNEL = EXAMPLE / "kernels.cu"
BK = 64

# (BM, BN, CONSUMERS, STAGES, PRODUCER, CLUSTER_M, SWIZZLE, RASTER, GROUP): every tile shape of
# the space, every swizzle, cluster 1 and 2, both rasters.
CONFIGS = [
    (128, 256, 2, 4, 1, 2, 128, 0, 8),
    (128, 256, 2, 3, 0, 1, 64, 1, 1),
    (128, 128, 1, 6, 1, 2, 32, 1, 8),
    (128, 128, 2, 5, 0, 2, 128, 0, 1),
    (256, 128, 2, 4, 1, 1, 32, 0, 8),
    (256, 128, 2, 3, 1, 2, 64, 1, 8),
    (128, 128, 1, 3, 0, 1, 64, 0, 8),
]
NAMES = ("BM", "BN", "CONSUMERS", "STAGES", "PRODUCER", "CLUSTER_M", "SWIZZLE", "RASTER", "GROUP")


def layout_source() -> str:
    text = KERNEL.read_text()
    return text[text.index("// LAYOUT BEGIN") : text.index("// LAYOUT END")]


HARNESS = r"""
#include <cstdio>
#define GEMM_HD static inline
#define BK 64
#define KB (SWIZZLE / 2)
#define MI (BM / (64 * CONSUMERS))
#define A_BOX_BYTES (BM * SWIZZLE)
#define B_BOX_BYTES (BN * SWIZZLE)
#define STAGE_A_BYTES (BM * BK * 2)
#define STAGE_B_BYTES (BN * BK * 2)
#define STAGE_BYTES (STAGE_A_BYTES + STAGE_B_BYTES)
#define B_SLICE (BN / CLUSTER_M)
@LAYOUT@
int main() {
    const u32 KT = DIM_K / BK, blocks = (DIM_M / BM) * (DIM_N / BN);
    printf("tx %u\n", stage_tx_bytes());
    for (u32 b = 0; b < blocks; ++b) { u32 m, n; tile_of(b, &m, &n); printf("tile %u %u %u\n", b, m, n); }
    for (u32 kt = 0; kt < KT; ++kt)
        for (u32 box = 0; box < BK / KB; ++box) {
            u32 off; int k, row;
            for (u32 tm = 0; tm < DIM_M / BM; ++tm) {
                a_copy(kt, box, tm, &off, &k, &row);
                printf("a %u %u %u %u %d %d\n", kt, box, tm, off, k, row);
            }
            for (u32 tn = 0; tn < DIM_N / BN; ++tn)
                for (u32 r = 0; r < CLUSTER_M; ++r) {
                    b_copy(kt, box, tn, r, &off, &k, &row);
                    printf("b %u %u %u %u %u %d %d\n", kt, box, tn, r, off, k, row);
                }
        }
    for (u32 s = 0; s < STAGES; ++s)
        for (u32 kk = 0; kk < BK / 16; ++kk) {
            for (u32 r0 = 0; r0 < BM; r0 += 64)
                printf("da %u %u %u %llu\n", s, r0, kk, smem_desc(a_step_offset(s, r0, kk)));
            printf("db %u %u %llu\n", s, kk, smem_desc(b_step_offset(s, kk)));
        }
    for (u32 t = 0; t < 128; ++t)
        for (u32 i = 0; i < BN / 2; ++i) printf("acc %u %u %u %u\n", t, i, acc_row(t, i), acc_col(t, i));
    for (u32 kt = 0; kt < KT + 2 * STAGES; ++kt)
        printf("parity %u %u %u\n", kt, full_parity(kt), kt >= STAGES ? empty_parity(kt) : 9u);
    return 0;
}
"""


def run_layout(cfg: dict[str, int], dims: tuple[int, int, int], tmp: Path) -> dict[str, list[list[int]]]:
    src = tmp / "layout.cpp"
    src.write_text(HARNESS.replace("@LAYOUT@", layout_source()))
    exe = tmp / "layout"
    defines = [f"-D{k}={v}" for k, v in cfg.items()]
    defines += [f"-DDIM_M={dims[0]}", f"-DDIM_N={dims[1]}", f"-DDIM_K={dims[2]}"]
    subprocess.run(["c++", "-std=c++17", "-O1", "-Wall", "-Werror", *defines, str(src), "-o", str(exe)],
                   check=True, capture_output=True, text=True, timeout=120)  # fmt: skip
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True, timeout=60).stdout
    rows: dict[str, list[list[int]]] = {}
    for line in out.splitlines():
        key, *values = line.split()
        rows.setdefault(key, []).append([int(v) for v in values])
    return rows


# -- the hardware model ---------------------------------------------------------------------
def swizzled(addr: np.ndarray, swizzle: int) -> np.ndarray:
    """TMA's and wgmma's swizzle of a byte address: chunk bits 4.. XOR bits 7.. (period 8 * S)."""
    mask = swizzle // 16 - 1
    return addr ^ (((addr >> 7) & mask) << 4)


def tma_copy(smem: np.ndarray, owner: np.ndarray, dst: int, tensor: np.ndarray, k: int, row: int,
             box: tuple[int, int], swizzle: int, tag: int) -> int:  # fmt: skip
    """Write a box of ``tensor`` (rows x k, row-major) at byte offset ``dst``; returns the bytes."""
    b0, b1 = box
    assert dst % (8 * swizzle) == 0, "a swizzled copy's destination is aligned to its pattern"
    assert row >= 0 and row + b1 <= tensor.shape[0] and k >= 0 and k + b0 <= tensor.shape[1]
    r, e = np.meshgrid(np.arange(b1), np.arange(b0), indexing="ij")
    addr = swizzled(dst + r * b0 * 2 + e * 2, swizzle)
    slot = addr // 2
    assert (owner[slot] == -1).all(), "two copies of one stage overlap"
    smem[slot] = tensor[row + r, k + e]
    owner[slot] = tag
    return b0 * b1 * 2


def wgmma_operand(smem: np.ndarray, owner: np.ndarray, desc: int, rows: int) -> np.ndarray:
    """The rows x 16 K-major operand a descriptor names."""
    start = (desc & 0x3FFF) << 4
    sbo = ((desc >> 32) & 0x3FFF) << 4
    base_offset = (desc >> 49) & 0x7
    swizzle = {1: 128, 2: 64, 3: 32}[desc >> 62]
    assert base_offset == 0
    assert sbo == 8 * swizzle, "K-major swizzled: 8-row atoms of S-byte rows"
    assert start % (8 * swizzle) + 32 <= swizzle, "a k16 step starts in the first row of an atom and fits in it"
    m, k = np.meshgrid(np.arange(rows), np.arange(16), indexing="ij")
    addr = swizzled(start + (m // 8) * sbo + (m % 8) * swizzle + 2 * k, swizzle)
    assert (owner[addr // 2] >= 0).all(), "wgmma reads shared memory no copy wrote"
    return smem[addr // 2]


def isa_fragment(bn: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) of register i of thread t, the m64nNk16 .f32 accumulator, from the ISA's figure."""
    row = np.zeros((128, bn // 2), dtype=np.int64)
    col = np.zeros((128, bn // 2), dtype=np.int64)
    for warp in range(4):
        for lane in range(32):
            t = warp * 32 + lane
            for j in range(bn // 8):
                for r, (dr, dc) in enumerate(((0, 0), (0, 1), (8, 0), (8, 1))):
                    row[t, 4 * j + r] = warp * 16 + lane // 4 + dr
                    col[t, 4 * j + r] = 8 * j + 2 * (lane % 4) + dc
    return row, col


def spec_boxes(cfg: dict[str, int], dims: tuple[int, int, int]) -> dict[str, tuple[int, int]]:
    """The boxes tuning.yaml gives the maps (their swizzle is SWIZZLE, the kernel's macro)."""
    env = {**cfg, "DIM_M": dims[0], "DIM_N": dims[1], "DIM_K": dims[2]}
    spec = yaml.safe_load((EXAMPLE / "tuning.yaml").read_text())
    args = spec["launches"][0]["args"]
    assert [a.get("tensor_map") if isinstance(a, dict) else a for a in args] == ["A", "BT", "C"]
    maps = args[:2]
    assert all(str(m["swizzle"]) == "SWIZZLE" for m in maps)
    out = {}
    for m in maps:
        dim = [Expression(str(d)).evaluate_int(env) for d in m["dims"]]
        assert dim == [dims[2], dims[0] if m["tensor_map"] == "A" else dims[1]]
        out[m["tensor_map"]] = tuple(Expression(str(b)).evaluate_int(env) for b in m["box"])
    return out


def simulate(cfg: dict[str, int], dims: tuple[int, int, int], rows: dict[str, list[list[int]]]) -> np.ndarray:
    m_, n_, k_ = dims
    bm, bn, cons, stages, cm, sw = (cfg[k] for k in ("BM", "BN", "CONSUMERS", "STAGES", "CLUSTER_M", "SWIZZLE"))
    rng = np.random.default_rng(sum(cfg.values()))
    a = rng.integers(-3, 4, (m_, k_)).astype(np.float64)
    bt = rng.integers(-3, 4, (n_, k_)).astype(np.float64)
    boxes = spec_boxes(cfg, dims)
    stage_bytes = (bm + bn) * BK * 2
    (tx,) = rows["tx"][0]
    assert tx == stage_bytes
    tiles = {b: (tm, tn) for b, tm, tn in rows["tile"]}
    assert sorted(tiles.values()) == [(i, j) for i in range(m_ // bm) for j in range(n_ // bn)], "a bijection"
    a_copies = {(kt, box, tm): (off, k, row) for kt, box, tm, off, k, row in rows["a"]}
    b_copies = {(kt, box, tn, r): (off, k, row) for kt, box, tn, r, off, k, row in rows["b"]}
    desc_a = {(s, r0, kk): d for s, r0, kk, d in rows["da"]}
    desc_b = {(s, kk): d for s, kk, d in rows["db"]}
    acc_row = np.zeros((128, bn // 2), dtype=np.int64)
    acc_col = np.zeros((128, bn // 2), dtype=np.int64)
    for t, i, r, c in rows["acc"]:
        acc_row[t, i], acc_col[t, i] = r, c
    isa_row, isa_col = isa_fragment(bn)
    mi_count = bm // (64 * cons)
    c = np.full((m_, n_), np.nan)
    blocks = len(tiles)
    kt_count = k_ // BK
    smem_bytes = stages * stage_bytes
    for first in range(0, blocks, cm):  # one cluster at a time
        cluster = [first + r for r in range(cm)]
        tn_set = {tiles[b][1] for b in cluster}
        assert len(tn_set) == 1, "the CTAs of a cluster share BT's slice"
        acc = {b: np.zeros((cons, mi_count, 64, bn)) for b in cluster}
        for kt in range(kt_count):
            s = kt % stages
            # the stage as its copies leave it (the barriers keep the previous round's reads before them)
            smem = {b: np.zeros(smem_bytes // 2) for b in cluster}
            owner = {b: np.full(smem_bytes // 2, -1) for b in cluster}
            landed = dict.fromkeys(cluster, 0)
            for rank, b in enumerate(cluster):
                tm, tn = tiles[b]
                for box in range(BK // (sw // 2)):
                    off, k, row = a_copies[(kt, box, tm)]
                    assert s * stage_bytes <= off < (s + 1) * stage_bytes
                    landed[b] += tma_copy(smem[b], owner[b], off, a, k, row, boxes["A"], sw, rank)
                    off, k, row = b_copies[(kt, box, tn, rank)]
                    for dst in cluster:  # multicast: the same offset in every CTA of the cluster
                        landed[dst] += tma_copy(smem[dst], owner[dst], off, bt, k, row, boxes["BT"], sw, rank)
            for b in cluster:
                assert landed[b] == tx, "the bytes a stage receives are what its full barrier expects"
                for w in range(cons):
                    for kk in range(BK // 16):
                        bop = wgmma_operand(smem[b], owner[b], desc_b[(s, kk)], bn)
                        for mi in range(mi_count):
                            aop = wgmma_operand(smem[b], owner[b], desc_a[(s, (w * mi_count + mi) * 64, kk)], 64)
                            acc[b][w, mi] += aop @ bop.T
        for b in cluster:
            tm, tn = tiles[b]
            for w in range(cons):
                for mi in range(mi_count):
                    regs = acc[b][w, mi][isa_row, isa_col]  # what thread t's register i holds
                    row0 = tm * bm + (w * mi_count + mi) * 64
                    for i in range(0, bn // 2, 2):  # the epilogue's float2 stores
                        r = row0 + acc_row[:, i]
                        col = tn * bn + acc_col[:, i]
                        assert np.isnan(c[r, col]).all() and np.isnan(c[r, col + 1]).all(), "written once"
                        c[r, col] = regs[:, i]
                        c[r, col + 1] = regs[:, i + 1]
    np.testing.assert_array_equal(c, a @ bt.T)
    return c


@pytest.mark.parametrize("values", CONFIGS, ids=lambda v: "-".join(map(str, v)))
def test_the_kernels_layout_multiplies_through_the_modelled_tma_and_wgmma(values: tuple[int, ...],
                                                                           tmp_path: Path) -> None:  # fmt: skip
    cfg = dict(zip(NAMES, values, strict=True))
    dims = (cfg["BM"] * cfg["CLUSTER_M"] * 2, cfg["BN"] * 2, 2 * cfg["STAGES"] * BK + BK)  # the ring wraps
    rows = run_layout(cfg, dims, tmp_path)
    simulate(cfg, dims, rows)
    kt_count = dims[2] // BK
    for kt, full, empty in rows["parity"]:
        assert full == (kt // cfg["STAGES"]) % 2  # round r completes phase r of the stage's full barrier
        if kt >= cfg["STAGES"]:  # the producer waits for round r - 1's release
            assert empty == (kt // cfg["STAGES"] - 1) % 2
    assert kt_count > cfg["STAGES"]


def test_the_model_catches_a_wrong_swizzle(tmp_path: Path) -> None:
    """The model is not blind: a descriptor whose swizzle mode disagrees with the copies fails."""
    cfg = dict(zip(NAMES, CONFIGS[0], strict=True))
    dims = (512, 512, 576)
    rows = run_layout(cfg, dims, tmp_path)
    rows["da"] = [[s, r0, kk, (d & ~(3 << 62)) | (2 << 62)] for s, r0, kk, d in rows["da"]]  # 64B mode
    with pytest.raises(AssertionError):
        simulate(cfg, dims, rows)


def test_every_tuning_parameter_is_read_by_the_kernel() -> None:
    spec = yaml.safe_load((EXAMPLE / "tuning.yaml").read_text())
    text = KERNEL.read_text()
    assert set(spec["tune_params"]) == set(NAMES)
    for name in NAMES:
        assert re.search(rf"\b{name}\b", text), name
