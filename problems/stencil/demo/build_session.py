"""Build problems/stencil/session.jsonl: a scripted session for `cacao --provider replay`.

WRITTEN BY HAND for demos, tests and suites; no model produced it. The kernels it writes
(the *.cu / *.yaml files beside this script) are real CUDA for this problem, compile-checked
by the tests and tuned for real when the session is replayed on a GPU. Two root branches:

- "tiles": one thread per cell with a tuned block shape, then a shared-memory patch with
  its halo per block;
- "columns": each thread walks a few cells down a column, keeping two rows in registers;
  one iteration.

Every kernel handles grids that are not multiples of its block (the three cases differ).
The texts' numbers are expectations, not measurements: a replay re-tunes every kernel on the
GPU at hand. Run it after editing a kernel or a text here:  python problems/stencil/demo/build_session.py
(tests/cluster/test_shipped_sessions.py checks that session.jsonl is up to date with it).
"""

from __future__ import annotations

from pathlib import Path

from cacao_tui.llm.demo_session import DemoSession, decision, structured, text

DEMO = DemoSession("stencil", Path(__file__).resolve().parent)


def build() -> list[dict]:
    b1, b2 = "b1-tiles", "b2-columns"
    return [
        text(None, None, "analyze", """
1. One Jacobi sweep of a 5-point stencil: each interior cell becomes 0.2 times the sum of
itself and its four neighbours, border cells are copied. The reference uses one thread per
cell in 16 x 16 blocks and loads all five values from global memory; neighbouring threads
load the same cells, so most loads hit L1/L2, but the load instruction count is five per cell.
2. Minimum traffic: every cell read once and written once, 2 * 64 MiB = 134 MB for the
4096 x 4096 case, about 0.031 ms at 4.3 TB/s; five flops per cell. Memory-bound. The small
case (1024 x 1024, 8 MiB) fits in L2, so it measures launch and L2 throughput instead.
3. Levers: coalesced rows (threadIdx.x along x), reuse of the vertical neighbours (shared
memory patches or a register window walking down a column), enough bytes in flight per SM,
and a block shape that suits all three grids, including the tall 512-wide one.
4. Traps: NX and NY change per case and are not multiples of every tile; the border must be
copied exactly; keep the reference's summation order (then the result is bit-exact, well
inside the 1e-5 tolerance).
"""),
        structured(None, None, "strategize", {"strategies": [
            {"name": "tiles", "title": "Thread per cell, then shared-memory patches",
             "description": "Start from one thread per cell with a tuned block shape; then stage each "
                            "block's patch plus its one-cell halo in shared memory so every cell is "
                            "loaded from global memory about once."},
            {"name": "columns", "title": "Column walks with a register window",
             "description": "Each thread walks RY cells down one column, keeping the cell above and the "
                            "centre in registers: one new vertical load per cell. Tune the walk length "
                            "and the block shape."},
        ]}),
        text(b1, 1, "plan", """
Two steps: (1) the reference's thread-per-cell kernel with the block shape tuned (BX along x in
{16..128}, BY in {1..16}), as a baseline over the three cases; (2) a shared-memory patch of
(BY + 2) x (BX + 2) cells per block, loaded cooperatively, so each cell is read from global
memory about once instead of relying on L1 hits.
"""),
        *DEMO.authoring(b1, 1, "1_direct.cu", "1_direct.yaml",
                        "Thread per cell with a tunable block shape; grids rounded up."),
        text(b1, 1, "propose", """
The thread-per-cell kernel issues five loads per cell; the horizontal neighbours mostly hit
L1, the vertical ones hit L1 only when the block is tall enough, else L2. A shared-memory patch
with its halo turns that into one global load per patch cell and five shared reads per cell.
Expect a modest gain on the large case and little on the small one.
"""),
        decision(b1, 1, "continue", "Explicit reuse through shared memory is the natural next step.",
                 "thread per cell, block shape tuned -> baseline, five loads per cell",
                 feedback="Stage each block's (BY + 2) x (BX + 2) patch, halo included, in shared memory "
                          "(cells outside the grid as 0, never used), then compute from the patch. Keep the "
                          "border copy and the summation order. BX in {32, 64, 128}, BY in {2, 4, 8, 16}."),
        *DEMO.authoring(b1, 2, "2_shared.cu", "2_shared.yaml", "Shared-memory patch with a one-cell halo per block."),
        text(b1, 2, "propose", """
With the patch, global loads are about (BX + 2)(BY + 2) / (BX * BY) per cell; what remains
is the barrier per block and the halo overhead of small blocks. Both strategies are now at
roughly one read and one write per cell; the rest is occupancy and tail effects per case.
"""),
        decision(b1, 2, "stop", "About one global read per cell; what is left is tuning, which the space covers.",
                 "shared-memory patch with halo -> about one global read per cell"),
        text(b2, 1, "plan", """
One iteration: each thread walks RY consecutive cells down its column (RY in {2..16}), keeping
the cell above and the centre in registers, so each step loads only the cell below and the
two horizontal neighbours (L1 hits from the adjacent threads). No shared memory, no barrier.
"""),
        *DEMO.authoring(b2, 1, "3_columns.cu", "3_columns.yaml",
                        "Column walks of RY cells with a two-row register window."),
        text(b2, 1, "propose", """
The register window removes two of the five loads per cell with no barrier. Long walks cut the
parallelism of the small and tall cases (fewer threads), so the tuner should settle on a
moderate RY that suits all three cases; the branch's idea is complete in this kernel.
"""),
        decision(b2, 1, "stop", "The idea is complete in one kernel; its knobs are in the tuning space.",
                 "column walks with a register window -> three loads per cell, no barrier"),
        *DEMO.polish([b1, b2]),
    ]


def main() -> int:
    return DEMO.main(build)


if __name__ == "__main__":
    raise SystemExit(main())
