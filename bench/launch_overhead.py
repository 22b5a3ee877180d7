"""The worker's Python cost per kernel launch (ktt.sequence), on a FAKE GPU whose launch does nothing.

The tuner queues every launch of a configuration from Python; on the shared GEMM benchmark
(about 46 configurations/s) that cost must not grow. This measures ``Sequence.run`` for a flat
program of 10 launches — plain (cuLaunchKernel), with two tensor-map arguments each (packed once
per bound address, so no encode per launch), and as 2-block cluster launches (cuLaunchKernelEx,
its config built once) — and prints ns per launch, best of 7 rounds of 2,000 runs. The GPU is
tests/ktt/fake_launch_gpu.FakeGpu with no-op launches: the figures are the Python side only.

    python bench/launch_overhead.py                  # this checkout
    python bench/launch_overhead.py --root /tmp/old  # another checkout's ktt (plain launches only
                                                     # when it predates tensor maps and clusters)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
KINDS = {
    "plain": "args: [X, Y, {{value: {i}}}]",
    "tensor maps": "args: [{{tensor_map: X, dims: [32, N / 32], box: [32, 8]}}, "
    "{{tensor_map: Y, dims: [32, N / 32], box: [32, 8]}}, {{value: {i}}}]",
    "cluster": "cluster: {{x: 2}}, args: [X, Y, {{value: {i}}}]",
}


def measure(kind: str, rounds: int = 7, runs: int = 2000) -> float | None:
    from fake_launch_gpu import FakeBuffers, FakeGpu

    from ktt.buffers import alloc_guarded
    from ktt.candidates import launch_plan
    from ktt.problem import load_problem
    from ktt.sequence import prepare
    from ktt.spec import SpecError, load_spec_text

    problem = load_problem(HERE / "tests" / "ktt" / "data" / "tiny")
    items = "".join(
        f"  - {{kernel: k, grid: {{x: 8}}, block: {{x: 128}}, {KINDS[kind].format(i=i)}}}\n" for i in range(10)
    )
    try:
        spec = load_spec_text("launches:\n" + items, problem)
    except SpecError:
        return None  # an older checkout
    program, scratch = launch_plan(spec, {}, problem.primary)
    gpu = FakeGpu({"k": lambda *a: None})
    gpu.launch = lambda *a: None  # type: ignore[method-assign]
    gpu.launch_ex = lambda *a: None  # type: ignore[attr-defined]
    bufs = FakeBuffers({b.name: alloc_guarded(gpu, problem.primary.bytes_of(b), b.name) for b in problem.buffers})
    seq = prepare(gpu, bufs, b"fake", program, scratch)
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(runs):
            seq.run(None)
        best = min(best, (time.perf_counter() - start) / (runs * 10) * 1e9)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=HERE, help="the checkout whose ktt/ (and tests/ktt fake) to time")
    args = ap.parse_args()
    root = args.root.resolve()
    sys.path[:0] = [str(root), str(root / "tests" / "ktt")]
    print(f"ktt from {root}")
    print(f"{'launch kind':<14} {'ns per launch':>14}")
    for kind in KINDS:
        ns = measure(kind)
        print(f"{kind:<14} {'(not supported)' if ns is None else f'{ns:,.0f}':>14}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
