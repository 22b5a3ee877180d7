"""Build problems/gemm_bf16/session.jsonl: a scripted session for `cacao --provider replay`.

WRITTEN BY HAND for demos, tests and suites; no model produced it. The kernels it writes are
real CUDA for this problem (the files beside this script, and the problem's baseline/ and
example/ kernels), compile-checked by the tests and tuned for real when the session is replayed
on a GPU. Two root branches:

- "simt": the CUDA-core baseline (register-tiled fp32 FMA on bf16 inputs), one iteration;
- "tensor-cores": warp-level mma.sync m16n8k16 first; then the Hopper kernel of example/ —
  TMA tensor maps into 128-byte-swizzled shared memory, wgmma, an mbarrier ring, a producer
  warpgroup — over a narrow space; then a configuration-only iteration (skip_implement) that
  widens the space to 2-CTA clusters with TMA multicast, the three swizzles and the raster order.

The texts' numbers are expectations, not measurements: a replay re-tunes every kernel on the
GPU at hand. Run it after editing a kernel or a text:  python problems/gemm_bf16/demo/build_session.py
(tests/cluster/test_shipped_sessions.py checks that session.jsonl is up to date with it).
"""

from __future__ import annotations

from pathlib import Path

from cacao_tui.llm.demo_session import DemoSession, decision, structured, text, tools

DEMO = DemoSession("gemm_bf16", Path(__file__).resolve().parent)
EXAMPLE_KERNEL = "../example/kernels.cu"


def build() -> list[dict]:
    b1, b2 = "b1-simt", "b2-tensor-cores"
    return [
        text(None, None, "analyze", """
1. C = A * B with A (DIM_M x DIM_K) and B given as BT (DIM_N x DIM_K), both bf16 buffers; C is
fp32. Both operands are K-major, the layout the tensor cores read directly. The
reference is cuBLAS through torch, so the speedup is against the vendor library.
2. Work: 2 * 4096^3 = 137 GFLOP (n4096) and 1.1 TFLOP (n8192); traffic at least 134 MB and
537 MB. At ~989 TFLOP/s of dense bf16 tensor-core peak and ~4.3 TB/s the floor is 0.14 ms and
1.1 ms: compute-bound by about 4x. The CUDA cores (~67 TFLOP/s fp32) cannot come near it.
3. Levers: tensor cores at all (mma.sync, then Hopper's wgmma reading shared memory through
descriptors); feeding them: TMA copies into swizzled shared memory, a multi-stage mbarrier
pipeline, a producer warpgroup so loads never wait behind math; CTA tile size for reuse; clusters
that multicast a shared operand tile to halve its L2 traffic; a grouped raster for L2 hits.
4. Traps: wgmma and setmaxnreg build only for sm_90a; the tensor map's swizzle must equal the
descriptors' swizzle; the full barrier must expect exactly the bytes that land; the tolerance
(0.05 absolute) allows fp32 summation-order differences, not dropped k-steps.
"""),
        structured(None, None, "strategize", {"strategies": [
            {"name": "simt", "title": "CUDA-core baseline",
             "description": "A register-tiled fp32 FMA kernel on bf16 inputs converted in shared memory: "
                            "the reference point for what the tensor cores buy."},
            {"name": "tensor-cores", "title": "Tensor cores: mma.sync, then TMA + wgmma",
             "description": "Start with warp-level mma.sync m16n8k16 on shared-memory tiles; then the "
                            "Hopper path: TMA tensor maps into swizzled shared memory, wgmma m64nNk16, an "
                            "mbarrier ring and a producer warpgroup; then clusters with multicast."},
        ]}),
        text(b1, 1, "plan", """
One iteration: a BM x BN tile per block, TM x TN outputs per thread, A's and BT's k-slices in shared
memory as fp32 (k-major), an outer product per k. Tune BM, BN in {64, 128}, BK in {8, 16, 32}, TM,
TN in {4, 8}. Expect a few percent of cuBLAS: it is the yardstick, not a contender.
"""),
        *DEMO.authoring(b1, 1, "../baseline/kernels.cu", "../baseline/tuning.yaml",
                        "Register-tiled SIMT GEMM, fp32 FMA on bf16 inputs; tile sizes tuned."),
        text(b1, 1, "propose", """
The kernel is bound by the CUDA cores' fp32 FMA rate; no tiling change moves it past that ceiling,
which is about a fifteenth of the tensor cores' bf16 rate. Nothing to gain on this branch.
"""),
        decision(b1, 1, "stop", "fp32 FMA is capped far below the tensor cores; the other branch uses them.",
                 "register-tiled SIMT, fp32 FMA -> correct, CUDA-core bound"),
        text(b2, 1, "plan", """
Step 1: warp-level tensor cores. A block of WARPS_M x WARPS_N warps, each warp MT x NT tiles of
mma.sync m16n8k16 (bf16 in, fp32 accumulate); 32-wide k-slices copied into padded shared memory
with 16-byte loads; fragments read as 32-bit words (two k values of one row). Tune the warp grid
and the tiles per warp.
"""),
        *DEMO.authoring(b2, 1, "1_mma_sync.cu", "1_mma_sync.yaml",
                        "mma.sync m16n8k16 bf16 on padded shared-memory tiles; warps and tiles per warp tuned."),
        text(b2, 1, "propose", """
mma.sync keeps every warp busy loading fragments from shared memory, and the loads into shared
memory go through registers, synchronously, with one buffer. On Hopper, wgmma reads both operands
straight from shared memory (a descriptor per operand) for a whole warpgroup at once, and the TMA
copies tiles asynchronously, completing on an mbarrier. Write that kernel: a ring of STAGES k-tiles
(full/empty barriers), 128-byte swizzle in the tensor maps and the descriptors, wgmma
m64nBNk16, and optionally a producer warpgroup that only issues copies (setmaxnreg moves its
registers to the consumers).
"""),
        decision(b2, 1, "continue", "The Hopper instructions remove the register traffic that bounds mma.sync.",
                 "mma.sync m16n8k16 on shared-memory tiles -> tensor cores in use, bound by fragment loads",
                 feedback="Write the TMA + wgmma kernel: tensor-map arguments for A and BT (dtype bfloat16, "
                          "box [64, BM] and [64, BN], swizzle 128B), STAGES in {4, 5}, BM and BN in {128, 256} "
                          "with one or two consumer warpgroups, PRODUCER in {0, 1}. No cluster yet."),
        text(b2, 2, "plan", """
The kernel of the feedback: tensor maps for A and BT passed as __grid_constant__ parameters, one
thread issues cp.async.bulk.tensor into a STAGES ring and arms each stage's full barrier with the
stage's byte count; consumers wait on it, issue BK/16 wgmma per m64 sub-tile, commit, keep one group
in flight and release the previous stage on its empty barrier. Tune tile shape, consumers, stages
and the producer warpgroup; cluster, swizzle and raster stay fixed for now.
"""),
        *DEMO.authoring(b2, 2, EXAMPLE_KERNEL, "2_wgmma.yaml",
                        "TMA + wgmma with an mbarrier ring and an optional producer warpgroup; 128B swizzle."),
        text(b2, 2, "propose", """
The pipeline keeps the tensor cores fed; what is left is L2 traffic and the order of tiles. Two
CTAs that compute vertically adjacent tiles read the same BT slice: in a cluster of two, each can
load half of it and multicast it to both (its stage is free when both CTAs' consumers released it).
A grouped raster keeps the A and BT slices of concurrent CTAs in L2. The kernel already has these
as parameters; only the space must open up: CLUSTER_M {1, 2}, SWIZZLE {128, 64, 32} (the maps'
swizzle follows the parameter), RASTER {0, 1}, GROUP {1, 8}, STAGES {3..6}.
"""),
        decision(b2, 2, "continue", "The kernel already supports clusters and raster orders; widen the space.",
                 "TMA + wgmma, mbarrier ring, producer warpgroup -> the tensor cores fed from swizzled tiles",
                 feedback="Keep kernels.cu. In tuning.yaml add cluster: {x: CLUSTER_M} with CLUSTER_M in {1, 2} "
                          "(BT's box becomes [SWIZZLE / 2, BN / CLUSTER_M]), swizzle: SWIZZLE with SWIZZLE in "
                          "{128, 64, 32}, RASTER {0, 1}, GROUP {1, 8}, STAGES {3, 4, 5, 6}.",
                 skip_implement=True),
        tools(b2, 3, "author", [
            ("write_file", {"path": "tuning.yaml", "content": DEMO.src("../example/tuning.yaml")}),
            ("check_compilation", {}),
        ], "Configuration only: the same kernel over clusters, swizzles and raster orders."),
        tools(b2, 3, "author", [("end_step", {"summary": "Space widened to clusters of 2 with BT multicast, "
                                                         "three swizzles, raster order and grouping."})]),
        text(b2, 3, "propose", """
With clusters, swizzle and raster in the space the tuner settles the structure; the next levers are
outside this kernel's parameters: a persistent tile scheduler (one CTA per SM walking tiles, so the
epilogue of one tile overlaps the loads of the next), a TMA store epilogue, and two consumer
warpgroups working on different tiles in turn. Each is a new kernel rather than a new space.
"""),
        decision(b2, 3, "stop", "The space of this kernel is covered; further gains need a different kernel design.",
                 "same kernel over clusters (multicast), swizzles and raster -> best structure chosen by the tuner"),
        *DEMO.polish([b1, b2]),
    ]


def main() -> int:
    return DEMO.main(build)


if __name__ == "__main__":
    raise SystemExit(main())
