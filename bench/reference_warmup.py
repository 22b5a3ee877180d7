"""Does a GPU reference's denominator depend on how long the GPU sat idle before it was timed?

    PYTHONPATH=/tmp/site:. python3 bench/reference_warmup.py [--problem problems/gemm_bf16]
        [--shape n4096] [--rounds 4] [--idle 15]

A python reference that computes on the GPU is timed with CUDA events: 5 warm-up calls, then the
minimum of 5 timed calls (ktt.host_reference, as the original's torch timer). This runs that exact
code path (``produce``, in a fresh process each time, as `ktt tune` does) after the GPU has been
idle for ``--idle`` seconds, alternating two warm-ups: the five calls, and ``--long`` calls (about a
quarter of a second of a 0.2 ms product: would a longer warm-up, with the clocks surely up, give a
steadier figure?). Each round ends with a third measurement taken right after the others (five
calls on a GPU just busy). It prints one row per measurement and, per warm-up, the spread of its
figures and how far the furthest is from the median of the third kind. Needs a GPU and torch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child(problem_dir: str, shape_name: str, warmup_calls: int) -> None:
    sys.path.insert(0, str(ROOT))
    from ktt import host_reference
    from ktt.problem import load_problem
    from ktt.workdir import WorkDir

    host_reference.EVENT_WARMUP = warmup_calls
    problem = load_problem(problem_dir)
    shape = problem.shape(shape_name)
    with tempfile.TemporaryDirectory(prefix="refwarm-") as tmp:
        work = WorkDir(Path(tmp))
        work.prepare_shape(problem, shape)
        timing = host_reference.produce(problem, shape, [0], 0, work, True)
    assert timing is not None
    print(json.dumps({"ms": timing.ms, "method": timing.method}), flush=True)


def measure(problem: str, shape: str, warmup_calls: int) -> dict:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", "--problem", problem, "--shape", shape,
         "--warmup-calls", str(warmup_calls)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"the reference failed: {proc.stderr.strip()[-400:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--problem", default="problems/gemm_bf16")
    ap.add_argument("--shape", default="n4096")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--idle", type=float, default=15.0, help="seconds the GPU sits idle before each cold measurement")
    ap.add_argument("--long", type=int, default=1100, help="the long warm-up's calls (default 1100)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--warmup-calls", type=int, default=5, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.problem, args.shape, args.warmup_calls)
        return 0
    sys.path.insert(0, str(ROOT))
    from ktt.host_reference import EVENT_WARMUP

    modes = {f"{EVENT_WARMUP} calls": EVENT_WARMUP, f"{args.long} calls": args.long}
    figures: dict[str, list[float]] = {m: [] for m in modes}
    busy: list[float] = []
    print(f"reference: {args.problem}, shape {args.shape}; {args.rounds} rounds, {args.idle:g} s idle before each")
    print(f"{'round':>5}  {'warm-up':<18} {'ms':>9}  method")
    for r in range(1, args.rounds + 1):
        for mode, calls in modes.items():
            time.sleep(args.idle)
            m = measure(args.problem, args.shape, calls)
            figures[mode].append(m["ms"])
            print(f"{r:>5}  {mode:<18} {m['ms']:>9.4f}  {m['method']}", flush=True)
        m = measure(args.problem, args.shape, EVENT_WARMUP)  # no idle: right after the others
        busy.append(m["ms"])
        print(f"{r:>5}  {'just busy, ' + str(EVENT_WARMUP):<18} {m['ms']:>9.4f}  {m['method']}", flush=True)
    ref = statistics.median(busy)
    print(f"\njust busy: median {ref:.4f} ms (spread {(max(busy) - min(busy)) / min(busy):.1%})")
    for mode, xs in figures.items():
        worst = max(xs, key=lambda x: abs(x - ref))
        print(f"{mode:<18} min {min(xs):.4f}  max {max(xs):.4f} ms  spread {(max(xs) - min(xs)) / min(xs):.1%}  "
              f"furthest from that median {(worst - ref) / ref:+.1%}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
