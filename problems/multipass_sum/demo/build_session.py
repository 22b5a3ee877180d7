"""Build problems/multipass_sum/session.jsonl: a scripted session for `cacao --provider replay`.

WRITTEN BY HAND for demos, tests and suites; no model produced it. The kernels it writes
(the *.cu / *.yaml files beside this script) are real CUDA for this problem, compile-checked
by the tests and tuned for real when the session is replayed on a GPU. Two root branches,
both launch programs (tuning.yaml names each launch's arguments and a scratch buffer):

- "two-pass": PARTS partial sums per row, then one block per row adds them; then the same
  with int4 loads in the first pass;
- "atomics": one pass in which every block adds its total to a zeroed scratch row total
  with an integer atomic, then a copy into SUMS; one iteration.

The texts' numbers are expectations, not measurements: a replay re-tunes every kernel on the
GPU at hand. Run it after editing a kernel or a text here:
python problems/multipass_sum/demo/build_session.py
(tests/cluster/test_shipped_sessions.py checks that session.jsonl is up to date with it).
"""

from __future__ import annotations

from pathlib import Path

from cacao_tui.llm.demo_session import DemoSession, decision, structured, text

DEMO = DemoSession("multipass_sum", Path(__file__).resolve().parent)


def build() -> list[dict]:
    b1, b2 = "b1-two-pass", "b2-atomics"
    return [
        text(None, None, "analyze", """
1. SUMS[r] is the sum of row r of an int matrix: 16 rows of 2^20 values (the primary case) and
4096 rows of 4096 (many_rows). The reference runs one block of 256 threads per row, so the
primary case has only 16 blocks: 16 of the GPU's SMs work and the rest idle.
2. Minimum traffic: every element read once, 64 MiB = 67 MB in both cases, about 0.016 ms at
4.3 TB/s; one add per element. Memory-bound, if the whole GPU is kept busy.
3. Levers: split each long row over many blocks (a second step combines the partial sums),
wide loads (int4), enough blocks for every SM in both cases, and a cheap combining step
(a second launch, or integer atomics into a zeroed total).
4. Traps: the tolerance is 0, but integer adds are exact in any order and do not overflow at
these sizes; COLS differs per case (2^20 and 4096), so the split must follow it; the partial
buffers and totals live in tuning.yaml's scratch (zeroed before each run).
"""),
        structured(None, None, "strategize", {"strategies": [
            {"name": "two-pass", "title": "Partial sums, then one block per row",
             "description": "A first launch writes PARTS partial sums per row (grid PARTS x ROWS), a "
                            "second adds them per row. Two launches whatever the configuration; tune "
                            "PARTS and the block size, then widen the loads."},
            {"name": "atomics", "title": "One pass with integer atomics",
             "description": "Every block adds BS * IPT values of a row and atomically adds its total to "
                            "a zeroed scratch total per row; a tiny launch copies the totals into SUMS."},
        ]}),
        text(b1, 1, "plan", """
Two steps: (1) a fixed two-launch program: pass 1 on a PARTS x ROWS grid writes one partial sum
per block into a scratch buffer, pass 2 adds each row's PARTS partials into SUMS; tune PARTS in
{16..256} and the block size; (2) the same with int4 loads in pass 1, four times fewer load
instructions for the same bytes.
"""),
        *DEMO.authoring(b1, 1, "1_two_pass.cu", "1_two_pass.yaml",
                        "Two launches: PARTS partial sums per row, then a block per row adds them."),
        text(b1, 1, "propose", """
With enough PARTS every SM has blocks in both cases. Pass 1 issues one 4-byte load per value;
at full bandwidth that is many load instructions per byte, so the LSU pipe and the number of
bytes in flight limit it. Read the chunks as int4: the chunk of each block becomes a whole
number of int4s, and the scalar loop stays for sizes that are not multiples of 4.
"""),
        decision(b1, 1, "continue", "Wider loads cut the load instructions of the pass that moves all the bytes.",
                 "two launches, PARTS partial sums per row -> all SMs busy in both cases",
                 feedback="Keep both launches; in pass 1 read the row as int4 when COLS % 4 == 0 (chunks "
                          "counted in int4s), else keep the scalar loop. Same tuning space."),
        *DEMO.authoring(b1, 2, "2_two_pass_vec.cu", "2_two_pass_vec.yaml",
                        "Pass 1 reads int4s (scalar path kept for other sizes)."),
        text(b1, 2, "propose", """
Pass 1 now moves 16 bytes a load. Pass 2 reads ROWS * PARTS partials, a small fraction of
the input. The remaining overhead is the second launch and its dependency on the first, a few
microseconds that the atomics branch avoids at the price of contention on the row totals.
"""),
        decision(b1, 2, "stop", "Near the floor for a two-launch program; the one-launch idea is the sibling's.",
                 "pass 1 with int4 loads -> four times fewer load instructions"),
        text(b2, 1, "plan", """
One iteration: pass 1 on a ceil(COLS / (BS * IPT)) x ROWS grid, each thread adding IPT values
(coalesced, BS apart), a block reduction with warp shuffles, and one atomicAdd per block into
a zeroed scratch total per row; a second, tiny launch copies the ROWS totals into SUMS. Tune BS
in {128, 256, 512} and IPT in {4..32}.
"""),
        *DEMO.authoring(b2, 1, "3_atomic.cu", "3_atomic.yaml",
                        "One pass with an atomic add per block into zeroed totals, then a copy."),
        text(b2, 1, "propose", """
One atomic per block is a few hundred atomics per row at most, negligible next to the reads,
and the copy launch moves ROWS ints. The pass reads 4-byte values; wider loads would help as
in the two-pass branch, but that branch already measures that change.
"""),
        decision(b2, 1, "stop", "The single-pass idea is complete; wider loads are measured by the two-pass branch.",
                 "one pass with integer atomics, then a copy -> one pass over X"),
        *DEMO.polish([b1, b2]),
    ]


def main() -> int:
    return DEMO.main(build)


if __name__ == "__main__":
    raise SystemExit(main())
