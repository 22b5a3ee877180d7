"""Build problems/softmax/session.jsonl: a scripted session for `cacao --provider replay`.

WRITTEN BY HAND for demos, tests and suites; no model produced it. The kernels it writes
(the *.cu / *.yaml files beside this script) are real CUDA for this problem, compile-checked
by the tests and tuned for real when the session is replayed on a GPU. Two root branches:

- "block-row": one block per row with three sweeps over the row (max, sum, write), then an
  online (max, sum) sweep with float4 loads, so the row is read twice instead of three times;
- "warp-row": one warp per row, online sweep and a shuffle merge, no shared memory; one
  iteration.

The texts' numbers are expectations, not measurements: a replay re-tunes every kernel on the
GPU at hand. Run it after editing a kernel or a text here:  python problems/softmax/demo/build_session.py
(tests/cluster/test_shipped_sessions.py checks that session.jsonl is up to date with it).
"""

from __future__ import annotations

from pathlib import Path

from cacao_tui.llm.demo_session import DemoSession, decision, structured, text

DEMO = DemoSession("softmax", Path(__file__).resolve().parent)


def build() -> list[dict]:
    b1, b2 = "b1-block-row", "b2-warp-row"
    return [
        text(None, None, "analyze", """
1. Each of the 4096 rows of X (4096 floats each) is normalised on its own: subtract the row's
maximum, exponentiate, divide by the sum of the exponentials. The reference is numpy in float64;
a naive kernel with one thread per row reads each row three times with a stride of a whole row
between neighbouring threads, so nothing is coalesced.
2. Minimum traffic: read X once and write Y once, 2 * 64 MiB = 134 MB, about 0.031 ms at
4.3 TB/s. About five flops per element: memory-bound by a wide margin; the work is to move the
data at full bandwidth in as few sweeps as possible.
3. Levers: one block (or one warp) per row so row accesses are coalesced; fewer sweeps over the
row (an online max/sum fuses the first two); 16-byte loads; enough rows in flight per SM to
hide DRAM latency (block size, blocks per SM).
4. Traps: the rules ask for the max subtraction (exp of 8 would be fine here, but keep it);
the tolerance is 1e-6 absolute, and the largest outputs are about 4e-3, so expf in fp32 is
accurate enough; COLS is a multiple of 4, so float4 rows are aligned.
"""),
        structured(None, None, "strategize", {"strategies": [
            {"name": "block-row", "title": "One block per row, then fewer sweeps",
             "description": "Start with a block per row and three sweeps (max, sum, write) with block "
                            "reductions; then fuse max and sum into one online sweep read as float4, "
                            "so X is read twice. Tune the block size."},
            {"name": "warp-row", "title": "One warp per row",
             "description": "A warp owns a row: online max/sum over float4 loads, a shuffle merge, a "
                            "write sweep. No shared memory or block barriers; tune the rows per block."},
        ]}),
        text(b1, 1, "plan", """
Two steps: (1) one block per row, three sweeps over the row with block-wide max and sum
reductions (warp shuffles, then one value per warp in shared memory), BLOCK in {128..1024};
the second and third sweeps should mostly hit L2, so expect 2-3x the floor; (2) fuse the max
and sum sweeps with an online (max, sum) pair per thread and read float4, two sweeps in all.
"""),
        *DEMO.authoring(b1, 1, "1_sweeps.cu", "1_sweeps.yaml",
                        "One block per row, three sweeps, block reductions; BLOCK tuned."),
        text(b1, 1, "propose", """
The kernel reads each row three times; if the row does not stay in L2 between sweeps, that is
three DRAM reads for one write. Fuse the first two sweeps: each thread keeps a running maximum
and a sum that it rescales when the maximum grows, and the block merges the pairs. With float4
loads that is two reads of X and one write of Y, and four times fewer load instructions.
"""),
        decision(b1, 1, "continue", "Fusing the max and sum sweeps removes a third of the traffic.",
                 "one block per row, three sweeps -> correct, about three reads of X per write",
                 feedback="Replace the first two sweeps with an online (max, sum) sweep over float4 loads, "
                          "merge the pairs across the block, keep the write sweep (float4). Add COLS % 4 == 0 "
                          "as a restriction and a MIN_BLOCKS launch bound to the space."),
        *DEMO.authoring(b1, 2, "2_online.cu", "2_online.yaml",
                        "Online max/sum sweep with float4 loads, then a float4 write sweep."),
        text(b1, 2, "propose", """
Two sweeps are the minimum for a row that does not fit in registers at every block size; the
remaining gap to the floor is the second read of X, which a register-resident row (each
thread holding COLS / BLOCK values) would remove at the price of registers and occupancy.
"""),
        decision(b1, 2, "stop", "Close to two reads of X per write; keeping rows in registers is another strategy.",
                 "online max/sum over float4, two sweeps -> one sweep fewer than iteration 1"),
        text(b2, 1, "plan", """
One iteration: a warp per row, WARPS rows per block, online (max, sum) over float4 loads with
a shuffle butterfly merge, then a float4 write sweep. No shared memory and no barrier; the
block shape only sets how many rows a block carries (WARPS in {1..16}).
"""),
        *DEMO.authoring(b2, 1, "3_warp_rows.cu", "3_warp_rows.yaml",
                        "One warp per row: online max/sum over float4, shuffle merge."),
        text(b2, 1, "propose", """
A warp per row gives each warp 512 float4 loads per sweep, enough to stream but with less
parallelism per row than a block; it trades the block barrier for fewer threads per row. It is
the same two-sweep traffic as the block-row branch's second kernel, so it cannot beat it by much.
"""),
        decision(b2, 1, "stop", "Same traffic as the block-row branch's online kernel; nothing new to try here.",
                 "one warp per row, online max/sum over float4 -> two sweeps, no barriers"),
        *DEMO.polish([b1, b2]),
    ]


def main() -> int:
    return DEMO.main(build)


if __name__ == "__main__":
    raise SystemExit(main())
