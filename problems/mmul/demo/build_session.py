"""Build problems/mmul/session.jsonl: a scripted session for `cacao --provider replay`.

This session was WRITTEN BY HAND for demos and tests; no model produced it. Its kernels
(the *.cu / *.yaml files beside this script) are real, correct CUDA that improve over
the iterations: naive -> shared-memory tiling -> register blocking -> vectorised and
double-buffered. Three root branches:

- "tiling": each decision's feedback says what the next iteration changes; iteration 2's
  decision asks for a configuration-only iteration (skip_implement: same kernel, a wider
  tuning space) and iteration 4's decision branches into two sub-strategies;
- "strip": one iteration, then stops;
- "quad": a compile error found by check_compilation and fixed inside the authoring step,
  then a kernel that compiles but stores one output in the wrong place (every configuration
  fails validation on a GPU): the decision is a retry with an error analysis, and the retry
  is a one-line fix of the latest files.

Steering (docs/UI.md, "Steering"): the calls below marked "used only when steered" answer
a branch that the user steered: a plan written again after a user message (any branch,
from its second iteration), "tiling" reverted to iteration 2 (it then continues as
iteration 5) and "strip" sent a message and told to continue instead of stopping.

Run it after editing a kernel or a text here:  python problems/mmul/demo/build_session.py
(tests/engine check that session.jsonl is up to date with this script).
"""

from __future__ import annotations

from pathlib import Path

from cacao_tui.llm.demo_session import DemoSession, decision, structured, text, tools

DEMO = DemoSession("mmul", Path(__file__).resolve().parent,
                   "hand-written demo session (see problems/mmul/README.md); not model output")

# The numbers in texts are expectations, not measurements: a replay re-tunes every kernel
# on the GPU at hand and the tuner reports the real figures.


def replan(branch: str, iteration: int, body: str) -> dict:
    """A plan written again after the user steered the branch (used only when steered)."""
    line = text(branch, iteration, "plan", body)
    line["comment"] = "used only when the user steers this branch"
    return line


# The "quad" kernel with one store sent to the wrong column: it compiles, and every
# configuration fails validation (a quarter of C is never written, another quarter twice).
QUAD_STORE = "if (r1 < DIM_M && c1 < DIM_N) C[(size_t)r1 * DIM_N + c1] = acc11;"
QUAD_BAD_STORE = "if (r1 < DIM_M && c1 < DIM_N) C[(size_t)r1 * DIM_N + c0] = acc11;"
# The first tiled space is deliberately narrow; the configuration-only iteration widens it.
NARROW_TILED = (
    DEMO.src("2_tiled.yaml").replace("TILE: [8, 16, 32]", "TILE: [8, 16]").replace("PAD: [0, 1]", "PAD: [0]")
)
# What the user's message to "strip" asks for: a search focused on long strips.
FOCUSED_STRIP = (
    DEMO.src("6_strip.yaml").replace("TM: [4, 8, 16]", "TM: [8, 16]").replace("BK: [8, 16, 32]", "BK: [8, 16]")
)


def build() -> list[dict]:
    lines: list[dict] = []
    add = lines.append

    add(text(None, None, "analyze", """
1. The reference computes C = A * B for 2048 x 2048 fp32 matrices, one thread per output, reading a
row of A and a column of B from global memory for every output: 2K loads per 2K flops, with the B
reads strided across threads of a block row only through the cache.
2. Minimum traffic is 3 * 16.8 MB = 50 MB (about 0.012 ms at 4.3 TB/s) against 17.2 GFLOP (about
0.26 ms at 67 TFLOP/s fp32). The problem is strongly compute-bound once data is reused on chip; the
naive kernel is bound by L1/L2 traffic instead.
3. Levers, by expected gain: reuse through shared-memory tiles (each element loaded once per tile),
register blocking (each shared value feeds several FMAs), 16-byte vector loads and double-buffered
tiles to hide load latency, then occupancy versus registers per thread. Tensor cores are excluded:
the rules keep plain fp32.
4. Traps: the tolerance is 1e-2 absolute, fine for fp32 sums of 2048 products in any order; keep
bounds checks unless the tuning space restricts tiles to divisors of 2048.
"""))
    add(structured(None, None, "strategize", {"strategies": [
        {"name": "tiling", "title": "Classic path: coalescing, shared tiles, register blocking",
         "description": "Start from a coalesced one-thread-per-output kernel, add square shared-memory "
                        "tiles, then 2D register blocking with a tuned block tile; branch into vectorised "
                        "variants once the blocking is in place."},
        {"name": "strip", "title": "1D register blocking (column strips)",
         "description": "Each thread accumulates a strip of TM rows of one column; B values from shared "
                        "memory are reused TM times and A values are warp broadcasts. Simpler than 2D "
                        "blocking, fewer registers."},
        {"name": "quad", "title": "Shared tiles with 2x2 outputs per thread",
         "description": "A small step beyond square tiles: each thread computes four outputs TILE apart, "
                        "doubling the FMAs per shared-memory load with little register pressure."},
    ]}))

    b1 = "b1-tiling"
    add(text(b1, 1, "plan", """
Branch plan, in three steps, one per iteration: (1) a coalesced one-thread-per-output kernel, where
threadIdx.x walks along N so B and C accesses are contiguous across a warp and A[row, k] is a
broadcast, with the block shape BLOCK_X in {16..128}, BLOCK_Y in {1..16} tuned (expect 5-10 ms: every
FMA still needs a load from L1/L2); (2) square shared-memory tiles, so each global element is loaded
once per tile (expect 1-3 ms, bound by shared-memory loads); (3) 2D register blocking, so each value
read from shared memory feeds several FMAs (expect well under 1 ms). Then vectorised variants.
"""))
    lines += DEMO.authoring(b1, 1, "1_naive.cu", "1_naive.yaml",
                       "Coalesced naive kernel with a tunable block shape.")
    add(text(b1, 1, "propose", """
The kernel is limited by load instructions, not by DRAM: each FMA needs its own load of B, and the
profile should show the L1/TEX pipe busy and long-scoreboard stalls. Stage TILE x TILE tiles of A and
B in shared memory so each global element is loaded once per tile; with TILE = 16 or 32 the load
count drops by that factor. Expect a 2-4x gain.
"""))
    add(decision(b1, 1, "continue", "Tiling is the obvious next step and should give a large gain.",
                 feedback="Replace the naive loop with square TILE x TILE shared-memory tiles of A and B "
                          "(one load per element per tile, __syncthreads() around the inner product). "
                          "Start with a small space: TILE in {8, 16}, PAD 0.",
                 summary="coalesced one-thread-per-output kernel -> baseline, bound by L1/L2 loads"))

    lines += DEMO.authoring(b1, 2, "2_tiled.cu", "2_tiled.yaml",
                       "Square shared-memory tiling, TILE in {8, 16} to start with.",
                       before=[("tuning_landscape", {"iteration": 1, "mode": "top", "n": 5})],
                       spec_text=NARROW_TILED)
    add(text(b1, 2, "propose", """
Tiling cut global loads as expected. The best configuration sits at TILE = 16, the largest value the
space allowed, so the space is clipped: TILE = 32 (1024 threads, four times the reuse per tile) and a
padded layout (PAD = 1, against bank conflicts on the transposed reads) were never tried. Re-tune the
same kernel over the wider space before changing the code.
"""))
    add(decision(b1, 2, "continue", "The optimum is at the edge of the declared range; widen it first.",
                 feedback="Keep kernels.cu as it is. In tuning.yaml widen TILE to {8, 16, 32} and PAD to "
                          "{0, 1}; nothing else changes.",
                 summary="square shared-memory tiles, TILE in {8, 16} -> large gain; best at the edge "
                         "(TILE = 16) of a clipped space",
                 skip_implement=True))

    add(tools(b1, 3, "author", [
        ("tuning_landscape", {"iteration": 2, "mode": "sweep", "param": "TILE"}),
        ("write_file", {"path": "tuning.yaml", "content": DEMO.src("2_tiled.yaml")}),
        ("check_compilation", {}),
    ], "Configuration only: the same kernel over a wider tiling space."))
    add(tools(b1, 3, "author", [("end_step", {"summary": "TILE widened to {8, 16, 32}, PAD to {0, 1}."})]))
    add(text(b1, 3, "propose", """
With the wider space the tuner settles the tile size; what remains is the kernel's structure: each
FMA still reads two values from shared memory, so it is bound by shared-memory bandwidth (LSU/MIO
throttle stalls). Register blocking fixes this: a thread computing a TM x TN micro-tile reads TM + TN
values per k and does TM * TN FMAs. With 4 x 4 or 8 x 8 the shared traffic per FMA drops 4-8x.
"""))
    add(decision(b1, 3, "continue", "Register blocking addresses the measured bottleneck directly.",
                 feedback="Write a 2D register-blocked kernel: a block computes a BM x BN tile, each "
                          "thread a TM x TN micro-tile; store A transposed in shared memory. Tune BM, BN in "
                          "{32, 64, 128}, BK in {8, 16, 32}, TM, TN in {2, 4, 8}, PAD in {0, 1}.",
                 summary="same tiled kernel over TILE {8, 16, 32} x PAD {0, 1} -> best tile found; still "
                         "bound by two shared loads per FMA"))

    lines += DEMO.authoring(b1, 4, "3_regblock.cu", "3_regblock.yaml",
                       "2D register blocking with block and thread tiles tuned.",
                       before=[("list_iterations", {})])
    add(text(b1, 4, "propose", """
With register blocking in place, the remaining costs are the scalar global loads (many instructions
per tile) and the exposed latency of loading each K-slice before computing on it (barrier stalls).
Two distinct directions: (a) 16-byte global loads with a second shared-memory stage, so the next slice
is in flight while the current one is consumed; (b) contiguous micro-tiles read from shared memory as
float4 and stored to C as float4, cutting shared-memory instructions. They change different parts of
the kernel and are worth exploring separately.
"""))
    add(decision(b1, 4, "branch", "Two independent directions remain; explore both from this kernel.",
                 feedback="Each sub-branch keeps the register blocking and changes one part of it.",
                 summary="2D register blocking (BM x BN block tile, TM x TN per thread) -> big gain; "
                         "load latency and shared-memory instructions remain",
                 subs=[
        {"name": "vec-dbuf", "title": "float4 global loads + double-buffered shared tiles",
         "description": "Keep the register blocking; load the next K-slice with float4 into registers "
                        "while computing, then store it to the second shared stage."},
        {"name": "vec-smem", "title": "float4 shared-memory fragments and float4 stores",
         "description": "Make each thread's TM rows and TN columns contiguous so fragments are read as "
                        "float4 from shared memory and results are stored as float4."},
    ]))
    for i in (2, 3, 4):
        add(replan(b1, i, """
Revised after the user's message: the direction stays (shared tiles, then register blocking, then
vectorised variants), and the user's request is taken into the next kernel and its tuning space;
the feedback of each decision still says what each iteration changes.
"""))
    # Used only when steered: "tiling" reverted to iteration 2 continues as iteration 5.
    add(replan(b1, 5, """
Revised after the revert to iteration 2 (the tiled kernel): skip the configuration-only step and go
straight to 2D register blocking from the tiled kernel, with the full block and thread tile space.
"""))
    lines += [dict(line, comment="used only when the user reverts this branch") for line in DEMO.authoring(
        b1, 5, "3_regblock.cu", "3_regblock.yaml",
        "Register blocking written from the tiled kernel (after the revert).",
        before=[("branch_log", {"name": "b2-strip"})])]
    add(dict(text(b1, 5, "propose", """
The register-blocked kernel from the reverted line matches iteration 4's; the sub-branches of
iteration 4 carry the vectorised work, so this line has nothing new to add.
"""), comment="used only when the user reverts this branch"))
    add(dict(decision(b1, 5, "stop", "The sub-branches of iteration 4 already explore what comes next.",
                      summary="register blocking again, from the reverted tiled kernel -> as iteration 4"),
             comment="used only when the user reverts this branch"))

    c1 = f"{b1}.1-vec-dbuf"
    add(text(c1, 1, "plan", """
Double-buffered register-blocked kernel: two shared stages; each step issues float4 loads for the next
K-slice into registers, computes on the current stage, stores the registers into the other stage and
syncs once. Restrict tiles to divisors of 2048 so no bounds checks are needed. Tune BM, BN in
{64, 128}, BK in {8, 16}, TM, TN in {4, 8}, PAD in {0, 4}.
"""))
    lines += DEMO.authoring(c1, 1, "4_vec_dbuf.cu", "4_vec_dbuf.yaml",
                       "float4 loads and two shared-memory stages on top of register blocking.")
    add(text(c1, 1, "propose", """
Load latency is now overlapped with compute and load instructions are 4x fewer. What remains is the
FMA pipe and register pressure (the largest tiles use over 120 registers, which caps occupancy at one
or two blocks per SM). Further gains would need warp-level tiling or tensor cores, which the rules
exclude for fp32.
"""))
    add(decision(c1, 1, "stop", "Close to what plain fp32 FMA can reach with this structure.",
                 summary="float4 loads + double-buffered shared tiles -> load latency hidden; FMA- and "
                         "register-bound now"))

    c2 = f"{b1}.2-vec-smem"
    add(text(c2, 1, "plan", """
Contiguous micro-tiles: thread (tx, ty) owns rows ty*TM..+TM and columns tx*TN..+TN, read as float4
from the transposed A tile and from the B tile, and stores its results as float4. Restrict TM, TN to
{4, 8} and tiles to divisors of 2048. Tune BM, BN in {32, 64, 128} and BK in {8, 16, 32}.
"""))
    lines += DEMO.authoring(c2, 1, "5_vec_smem.cu", "5_vec_smem.yaml",
                       "Register blocking with float4 shared-memory fragments and float4 stores.")
    add(text(c2, 1, "propose", """
Shared-memory instructions per FMA dropped 4x. Contiguous columns per thread make the float4 reads of
B hit more banks per request, which the profile shows as some extra shared wavefronts; overall it
competes with the double-buffered variant. Combining both ideas is the natural next step, but that is
the sibling branch's kernel plus this change.
"""))
    add(decision(c2, 1, "stop", "Comparable to the sibling; combining them is a new strategy, not a tweak.",
                 summary="float4 shared-memory fragments and float4 stores -> 4x fewer shared "
                         "instructions; some extra bank wavefronts"))

    b2 = "b2-strip"
    add(text(b2, 1, "plan", """
1D register blocking: a block of BN x (BM/TM) threads computes a BM x BN tile; each thread accumulates
TM rows of one column. B values come from shared memory once per TM FMAs; A values are warp-wide
broadcasts. Tune BM, BN in {32, 64, 128}, BK in {8, 16, 32}, TM in {4, 8, 16}, PAD in {0, 1}.
"""))
    lines += DEMO.authoring(b2, 1, "6_strip.cu", "6_strip.yaml", "Column-strip register blocking.")
    add(text(b2, 1, "propose", """
The strip kernel removes most shared-memory traffic for B but still reads A once per FMA (as a
broadcast), so it sits between square tiling and 2D blocking. 2D blocking is already being explored in
the tiling branch; continuing here would duplicate it.
"""))
    add(decision(b2, 1, "stop", "Its natural continuation is the 2D blocking the tiling branch already has.",
                 summary="column strips (TM rows per thread) -> between square tiles and 2D blocking"))
    # Used only when steered: a message ("focus on long strips") and --decision continue.
    add(replan(b2, 2, """
Revised after the user's message: keep the strip kernel and spend the next iteration on long strips
only (TM in {8, 16}, BK in {8, 16}), where the A broadcasts are amortised best.
"""))
    lines += [dict(line, comment="used only when the user steers this branch") for line in DEMO.authoring(
        b2, 2, "6_strip.cu", "6_strip.yaml", "The strip kernel over long strips only, as the user asked.",
        spec_text=FOCUSED_STRIP, kernel_write=False)]
    add(dict(text(b2, 2, "propose", """
Long strips amortise the A broadcasts, as the user expected; the kernel remains between square tiling
and 2D blocking.
"""), comment="used only when the user steers this branch"))
    add(dict(decision(b2, 2, "stop", "The user's focused search is done; 2D blocking lives in the tiling branch.",
                      summary="the strip kernel over TM {8, 16}, BK {8, 16} (the user's request) -> the "
                              "long-strip corner of the space"),
             comment="used only when the user steers this branch"))

    b3 = "b3-quad"
    add(text(b3, 1, "plan", """
Shared tiles with a 2 x 2 group of outputs per thread, TILE apart: a TILE x TILE block covers a
2*TILE square of C; each k reads two A and two B values from shared memory for four FMAs. Tune TILE
in {8, 16, 32} and PAD in {0, 1}.
"""))
    wrong = DEMO.src("7_quad.cu").replace(QUAD_STORE, QUAD_BAD_STORE)
    typo = wrong.replace("acc00 = fmaf(a0, b0, acc00);", "acc00 = fmaf(a0, b0, acc0);")
    add(tools(b3, 1, "author", [
        ("write_file", {"path": "kernels.cu", "content": typo}),
        ("write_file", {"path": "tuning.yaml", "content": DEMO.src("7_quad.yaml")}),
        ("check_compilation", {}),
    ], "First version of the 2x2 kernel."))
    add(tools(b3, 1, "author", [
        ("edit_file", {"path": "kernels.cu", "old_text": "acc00 = fmaf(a0, b0, acc0);",
                       "new_text": "acc00 = fmaf(a0, b0, acc00);"}),
        ("check_compilation", {}),
    ], "The check found a typo in an accumulator name; fixing it."))
    add(tools(b3, 1, "author", [("end_step", {"summary": "2x2 outputs per thread on square tiles (typo fixed)."})]))
    add(text(b3, 1, "propose", """
Every configuration failed validation with the same pattern: a quarter of C is never written and
another quarter is wrong. That is a store, not the arithmetic: the fourth accumulator goes to the
wrong column. Fix the store before measuring anything.
"""))
    add(decision(b3, 1, "retry", "A single wrong store makes every configuration fail; fix it and re-tune.",
                 feedback="Change only the last store: acc11 belongs at column c1 of row r1.",
                 summary="2x2 outputs per thread on square tiles -> every configuration failed validation "
                         "(one store in the wrong column)",
                 error={"error_type": "validation",
                        "root_cause": "acc11 is stored at C[r1 * DIM_N + c0], on top of acc10, so the "
                                      "(r1, c1) outputs are never written",
                        "suggested_fix": "store acc11 at C[(size_t)r1 * DIM_N + c1]"}))
    add(tools(b3, 2, "author", [
        ("grep_tuner_output", {"iteration": 1, "text": "validation_failed"}),
        ("edit_file", {"path": "kernels.cu", "old_text": QUAD_BAD_STORE, "new_text": QUAD_STORE}),
        ("check_compilation", {}),
    ], "The retry: the one-line fix the error analysis names."))
    add(tools(b3, 2, "author", [("end_step", {"summary": "acc11 stored at (r1, c1)."})]))
    add(text(b3, 2, "propose", """
With the store fixed the kernel validates. It doubles the FMAs per shared-memory load of square tiling
with low register use; it is a smaller step than the register blocking of the tiling branch, which
subsumes it.
"""))
    add(decision(b3, 2, "stop", "Subsumed by the tiling branch's register blocking.",
                 summary="the same 2x2 kernel with the store fixed -> valid; between square tiles and "
                         "register blocking"))
    add(replan(b3, 2, """
Revised after the user's message: fix the failing store first (the retry), then keep the 2x2 layout
and take the user's request into the tuning space.
"""))
    lines += DEMO.polish([b1, c1, c2, b2, b3])
    return lines


def main() -> int:
    return DEMO.main(build)


if __name__ == "__main__":
    raise SystemExit(main())
