"""Build problems/transpose/session.jsonl: a scripted session for `cacao --provider replay`.

WRITTEN BY HAND for demos, tests and suites; no model produced it. The kernels it writes
(the *.cu / *.yaml files beside this script) are real CUDA for this problem, compile-checked
by the tests and tuned for real when the session is replayed on a GPU. Two root branches:

- "tiles": one thread per element (coalesced reads, scattered writes), then a shared-memory
  tile with an optional padding column, so both sides are coalesced;
- "quads": each thread moves a 4 x 4 block through registers with float4 loads and stores;
  one iteration.

The texts' numbers are expectations, not measurements: a replay re-tunes every kernel on the
GPU at hand. Run it after editing a kernel or a text here:  python problems/transpose/demo/build_session.py
(tests/cluster/test_shipped_sessions.py checks that session.jsonl is up to date with it).
"""

from __future__ import annotations

from pathlib import Path

from cacao_tui.llm.demo_session import DemoSession, decision, structured, text

DEMO = DemoSession("transpose", Path(__file__).resolve().parent)


def build() -> list[dict]:
    b1, b2 = "b1-tiles", "b2-quads"
    return [
        text(None, None, "analyze", """
1. B (COLS x ROWS) receives A (ROWS x COLS = 8192 x 4096) transposed; the reference is a
sequential C loop. On the GPU, a thread per element reads a row of A coalesced but writes a
column of B: the 32 stores of a warp land ROWS * 4 bytes apart, one sector each.
2. Minimum traffic: read A once and write B once, 2 * 128 MiB = 268 MB, about 0.062 ms at
4.3 TB/s, and no arithmetic at all: purely memory-bound, and the only question is how close
both directions get to full-width transactions.
3. Levers: make both the reads and the writes coalesced (a tile staged in shared memory, or
small blocks transposed in registers), avoid shared-memory bank conflicts on the column reads
of a tile (a padding column), and move enough bytes per thread to keep DRAM busy.
4. Traps: the tolerance is 0 (a transpose only moves values, so any correct kernel is exact);
ROWS and COLS are multiples of 32 here, but guards cost little; keep 64-bit indices (B has
32 Mi elements, and row * ROWS overflows int for wider matrices).
"""),
        structured(None, None, "strategize", {"strategies": [
            {"name": "tiles", "title": "Thread per element, then shared-memory tiles",
             "description": "Start from one thread per element to measure the cost of scattered writes; "
                            "then stage TILE x TILE tiles in shared memory so reads and writes are both "
                            "coalesced, with a padding column against bank conflicts."},
            {"name": "quads", "title": "4 x 4 blocks in registers",
             "description": "Each thread loads four float4 rows of A, transposes the 4 x 4 block in "
                            "registers and stores four float4 rows of B: 16-byte accesses on both sides "
                            "without shared memory."},
        ]}),
        text(b1, 1, "plan", """
Two steps: (1) one thread per element with the block shape tuned (BX in {16, 32, 64}, BY in
{1..32}), to see what the uncoalesced writes cost (expect 3-5x the floor); (2) TILE x TILE
tiles through shared memory, read and written row by row, TILE in {32, 64}, rows per pass of
the block (STEP) and a padding column (PAD in {0, 1}) tuned.
"""),
        *DEMO.authoring(b1, 1, "1_naive.cu", "1_naive.yaml",
                        "Thread per element; coalesced reads, scattered writes; block shape tuned."),
        text(b1, 1, "propose", """
The writes are the bottleneck: each warp's 32 stores touch 32 different rows of B, so the
DRAM sees 32-byte sectors instead of 128-byte lines and the store queue backs up. Staging a
tile in shared memory lets the block write whole rows of B; the column reads of the tile then
need a padding column to avoid 32-way bank conflicts.
"""),
        decision(b1, 1, "continue", "Coalescing the writes through a shared tile addresses the measured bottleneck.",
                 "thread per element -> reads coalesced, writes scattered across rows of B",
                 feedback="Stage TILE x TILE tiles of A in shared memory; write B row by row from the tile's "
                          "columns. Tune TILE in {32, 64}, STEP (rows per pass) in {4, 8, 16} and PAD in "
                          "{0, 1}; keep the bounds checks."),
        *DEMO.authoring(b1, 2, "2_tiled.cu", "2_tiled.yaml",
                        "Shared-memory tile with a padding column; both sides coalesced."),
        text(b1, 2, "propose", """
Both directions are now full-line transactions; with PAD = 1 the column reads are
conflict-free. What remains is latency hiding (bytes in flight per SM), which the tile size and
STEP already cover; the kernel is close to a copy's bandwidth.
"""),
        decision(b1, 2, "stop", "Both sides coalesced and conflict-free; the rest is in the tuning space.",
                 "shared-memory tiles with padding -> coalesced reads and writes"),
        text(b2, 1, "plan", """
One iteration: a thread owns a 4 x 4 block; it reads four float4s from four consecutive rows of
A, and writes four float4s to four consecutive rows of B, transposing in registers. ROWS and
COLS must be multiples of 4 (a restriction). Tune the block shape BX in {8..64}, BY in {1..16}.
"""),
        *DEMO.authoring(b2, 1, "3_quads.cu", "3_quads.yaml",
                        "4 x 4 blocks transposed in registers with float4 loads and stores."),
        text(b2, 1, "propose", """
Every access is 16 bytes, but the 32 threads of a warp still write to 4 x 32 rows of B along x,
so the stores of a warp are 16-byte pieces of many lines, better than the naive kernel's 4 bytes
but not full lines; a taller block (BY) puts neighbouring pieces of a line in one warp's reach
through L2. The shared-tile branch covers full coalescing; this branch is done.
"""),
        decision(b2, 1, "stop", "16-byte accesses on both sides, no shared memory; full coalescing is the sibling's.",
                 "4 x 4 register transposes with float4 -> 16-byte stores, partially coalesced"),
        *DEMO.polish([b1, b2]),
    ]


def main() -> int:
    return DEMO.main(build)


if __name__ == "__main__":
    raise SystemExit(main())
