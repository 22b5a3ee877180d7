"""Build problems/mmul/session.jsonl: a scripted session for `cacao --provider replay`.

This session was WRITTEN BY HAND for demos and tests; no model produced it. Its kernels
(the *.cu / *.yaml files beside this script) are real, correct CUDA that improve over
the iterations: naive -> shared-memory tiling -> register blocking -> vectorised and
double-buffered. Three root branches; the "tiling" branch decides to `branch` into two
sub-strategies; the "quad" branch shows a compile error fixed inside the authoring step.

Run it after editing a kernel or a text here:  python problems/mmul/demo/build_session.py
(tests/engine check that session.jsonl is up to date with this script).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SESSION = HERE.parent / "session.jsonl"

# The numbers in texts are expectations, not measurements: a replay re-tunes every kernel
# on the GPU at hand and the tuner reports the real figures.


def src(name: str) -> str:
    return (HERE / name).read_text(encoding="utf-8")


def text(branch: str | None, iteration: int | None, node: str, body: str) -> dict:
    return {"branch": branch, "iteration": iteration, "node": node, "response": {"text": body.strip()}}


def tools(branch: str, iteration: int, node: str, calls: list[tuple[str, dict]], note: str = "") -> dict:
    return {
        "branch": branch, "iteration": iteration, "node": node,
        "response": {"text": note, "tool_calls": [{"name": n, "arguments": a} for n, a in calls]},
    }


def structured(branch: str | None, iteration: int | None, node: str, value: dict) -> dict:
    return {"branch": branch, "iteration": iteration, "node": node, "response": {"text": json.dumps(value)}}


def authoring(branch: str, iteration: int, kernel: str, spec: str, summary: str,
              before: list[tuple[str, dict]] | None = None) -> list[dict]:
    """write both files, check, end_step — the usual two calls of a clean authoring step."""
    calls = (before or []) + [
        ("write_file", {"path": "kernels.cu", "content": src(kernel)}),
        ("write_file", {"path": "tuning.yaml", "content": src(spec)}),
        ("check_compilation", {}),
    ]
    return [
        tools(branch, iteration, "author", calls, "Writing the kernel and its tuning space, then checking."),
        tools(branch, iteration, "author", [("end_step", {"summary": summary})]),
    ]


def decision(branch: str, iteration: int, action: str, reason: str, subs: list[dict] | None = None) -> dict:
    value = {"action": action, "reason": reason, "sub_strategies": subs or []}
    return structured(branch, iteration, "decide", value)


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
Start with a coalesced one-thread-per-output kernel: threadIdx.x walks along N so B and C accesses are
contiguous across a warp and A[row, k] is a broadcast. Tune the block shape BLOCK_X in {16..128} and
BLOCK_Y in {1..16} (64 to 1024 threads). Expect roughly 5-10 ms: every FMA still needs a load from L1/L2.
"""))
    lines += authoring(b1, 1, "1_naive.cu", "1_naive.yaml",
                       "Coalesced naive kernel with a tunable block shape.")
    add(text(b1, 1, "propose", """
The kernel is limited by load instructions, not by DRAM: each FMA needs its own load of B, and the
profile should show the L1/TEX pipe busy and long-scoreboard stalls. Stage TILE x TILE tiles of A and
B in shared memory so each global element is loaded once per tile; with TILE = 16 or 32 the load
count drops by that factor. Expect a 2-4x gain.
"""))
    add(decision(b1, 1, "continue", "Tiling is the obvious next step and should give a large gain."))

    add(text(b1, 2, "plan", """
Square shared-memory tiles: a TILE x TILE block loads one tile of A and one of B per K-step, syncs, and
accumulates TILE products from shared memory. Tune TILE in {8, 16, 32} and PAD in {0, 1}. Expect
1-3 ms: now limited by shared-memory loads (two per FMA).
"""))
    lines += authoring(b1, 2, "2_tiled.cu", "2_tiled.yaml",
                       "Square shared-memory tiling with TILE and PAD tuned.",
                       before=[("query_tuning", {"iteration": 1, "top": 5})])
    add(text(b1, 2, "propose", """
Each FMA still reads two values from shared memory, so the kernel is bound by shared-memory bandwidth
(LSU/MIO throttle stalls, high shared-memory pipe utilisation). Register blocking fixes this: a
thread computing a TM x TN micro-tile reads TM + TN values per k and does TM * TN FMAs. With 4 x 4 or
8 x 8 the shared traffic per FMA drops 4-8x. Expect another 2-4x.
"""))
    add(decision(b1, 2, "continue", "Register blocking addresses the measured bottleneck directly."))

    add(text(b1, 3, "plan", """
2D register blocking: a block computes a BM x BN tile with (BM/TM) x (BN/TN) threads; A is stored
transposed in shared memory so both fragments are read along rows; each thread accumulates TM x TN
outputs. Tune BM, BN in {32, 64, 128}, BK in {8, 16, 32}, TM, TN in {2, 4, 8}, PAD in {0, 1} with
64-1024 threads and 48 KB of shared memory. Expect well under 1 ms.
"""))
    lines += authoring(b1, 3, "3_regblock.cu", "3_regblock.yaml",
                       "2D register blocking with block and thread tiles tuned.")
    add(text(b1, 3, "propose", """
With register blocking in place, the remaining costs are the scalar global loads (many instructions
per tile) and the exposed latency of loading each K-slice before computing on it (barrier stalls).
Two distinct directions: (a) 16-byte global loads with a second shared-memory stage, so the next slice
is in flight while the current one is consumed; (b) contiguous micro-tiles read from shared memory as
float4 and stored to C as float4, cutting shared-memory instructions. They change different parts of
the kernel and are worth exploring separately.
"""))
    add(decision(b1, 3, "branch", "Two independent directions remain; explore both from this kernel.", [
        {"name": "vec-dbuf", "title": "float4 global loads + double-buffered shared tiles",
         "description": "Keep the register blocking; load the next K-slice with float4 into registers "
                        "while computing, then store it to the second shared stage."},
        {"name": "vec-smem", "title": "float4 shared-memory fragments and float4 stores",
         "description": "Make each thread's TM rows and TN columns contiguous so fragments are read as "
                        "float4 from shared memory and results are stored as float4."},
    ]))

    c1 = f"{b1}.1-vec-dbuf"
    add(text(c1, 1, "plan", """
Double-buffered register-blocked kernel: two shared stages; each step issues float4 loads for the next
K-slice into registers, computes on the current stage, stores the registers into the other stage and
syncs once. Restrict tiles to divisors of 2048 so no bounds checks are needed. Tune BM, BN in
{64, 128}, BK in {8, 16}, TM, TN in {4, 8}, PAD in {0, 4}.
"""))
    lines += authoring(c1, 1, "4_vec_dbuf.cu", "4_vec_dbuf.yaml",
                       "float4 loads and two shared-memory stages on top of register blocking.")
    add(text(c1, 1, "propose", """
Load latency is now overlapped with compute and load instructions are 4x fewer. What remains is the
FMA pipe and register pressure (the largest tiles use over 120 registers, which caps occupancy at one
or two blocks per SM). Further gains would need warp-level tiling or tensor cores, which the rules
exclude for fp32.
"""))
    add(decision(c1, 1, "stop", "Close to what plain fp32 FMA can reach with this structure."))

    c2 = f"{b1}.2-vec-smem"
    add(text(c2, 1, "plan", """
Contiguous micro-tiles: thread (tx, ty) owns rows ty*TM..+TM and columns tx*TN..+TN, read as float4
from the transposed A tile and from the B tile, and stores its results as float4. Restrict TM, TN to
{4, 8} and tiles to divisors of 2048. Tune BM, BN in {32, 64, 128} and BK in {8, 16, 32}.
"""))
    lines += authoring(c2, 1, "5_vec_smem.cu", "5_vec_smem.yaml",
                       "Register blocking with float4 shared-memory fragments and float4 stores.")
    add(text(c2, 1, "propose", """
Shared-memory instructions per FMA dropped 4x. Contiguous columns per thread make the float4 reads of
B hit more banks per request, which the profile shows as some extra shared wavefronts; overall it
competes with the double-buffered variant. Combining both ideas is the natural next step, but that is
the sibling branch's kernel plus this change.
"""))
    add(decision(c2, 1, "stop", "Comparable to the sibling; combining them is a new strategy, not a tweak."))

    b2 = "b2-strip"
    add(text(b2, 1, "plan", """
1D register blocking: a block of BN x (BM/TM) threads computes a BM x BN tile; each thread accumulates
TM rows of one column. B values come from shared memory once per TM FMAs; A values are warp-wide
broadcasts. Tune BM, BN in {32, 64, 128}, BK in {8, 16, 32}, TM in {4, 8, 16}, PAD in {0, 1}.
"""))
    lines += authoring(b2, 1, "6_strip.cu", "6_strip.yaml", "Column-strip register blocking.")
    add(text(b2, 1, "propose", """
The strip kernel removes most shared-memory traffic for B but still reads A once per FMA (as a
broadcast), so it sits between square tiling and 2D blocking. 2D blocking is already being explored in
the tiling branch; continuing here would duplicate it.
"""))
    add(decision(b2, 1, "stop", "Its natural continuation is the 2D blocking the tiling branch already has."))

    b3 = "b3-quad"
    add(text(b3, 1, "plan", """
Shared tiles with a 2 x 2 group of outputs per thread, TILE apart: a TILE x TILE block covers a
2*TILE square of C; each k reads two A and two B values from shared memory for four FMAs. Tune TILE
in {8, 16, 32} and PAD in {0, 1}.
"""))
    broken = src("7_quad.cu").replace("acc00 = fmaf(a0, b0, acc00);", "acc00 = fmaf(a0, b0, acc0);")
    add(tools(b3, 1, "author", [
        ("write_file", {"path": "kernels.cu", "content": broken}),
        ("write_file", {"path": "tuning.yaml", "content": src("7_quad.yaml")}),
        ("check_compilation", {}),
    ], "First version of the 2x2 kernel."))
    add(tools(b3, 1, "author", [
        ("edit_file", {"path": "kernels.cu", "old_text": "acc00 = fmaf(a0, b0, acc0);",
                       "new_text": "acc00 = fmaf(a0, b0, acc00);"}),
        ("check_compilation", {}),
    ], "The check found a typo in an accumulator name; fixing it."))
    add(tools(b3, 1, "author", [("end_step", {"summary": "2x2 outputs per thread on square tiles (typo fixed)."})]))
    add(text(b3, 1, "propose", """
Twice the FMAs per shared-memory load of square tiling; registers stay low. It is a smaller step than
the register blocking of the tiling branch, which subsumes it.
"""))
    add(decision(b3, 1, "stop", "Subsumed by the tiling branch's register blocking."))
    return lines


def render(lines: list[dict]) -> str:
    header = {"format": "cacao-llm-session", "version": 1, "problem": "mmul",
              "note": "hand-written demo session (see problems/mmul/README.md); not model output"}
    body = [json.dumps({k: v for k, v in line.items() if v is not None}, ensure_ascii=False) for line in lines]
    return "\n".join([json.dumps(header), *body]) + "\n"


def main() -> int:
    text_out = render(build())
    if "--check" in sys.argv[1:]:
        current = SESSION.read_text(encoding="utf-8") if SESSION.exists() else ""
        if current != text_out:
            print(f"{SESSION} is out of date; run python {Path(__file__)}", file=sys.stderr)
            return 1
        return 0
    SESSION.write_text(text_out, encoding="utf-8")
    print(f"wrote {SESSION} ({text_out.count(chr(10)) - 1} calls)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
