"""Kernel Tuner 1.5.0 on the large GEMM space: one strategy, one seed, a wall-clock limit.

Run by bench/search_large_space.py (a subprocess per run, on the GPU machine where
kernel_tuner is installed). Prints one JSON line: every evaluated configuration with the
seconds since ``tune_kernel`` was called when its result was recorded, Kernel Tuner's own
time (ms, the mean of its iterations) or null when it failed, and the totals.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

import kernel_tuner
import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/, for the shared Kernel Tuner harness
from kernel_tuner_harness import WallClock, patch_launch_check

patch_launch_check()  # cuda-bindings 13's 1-tuples (see bench/kernel_tuner_harness.py)

HERE = Path(__file__).resolve().parent
M = N = K = 2048
TOLERANCE = 0.01  # as bench/gemm_space/problem/problem.yaml


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--strategy", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-limit", type=float, required=True)
    ap.add_argument("--iterations", type=int, default=7)
    ap.add_argument("--ref-cache", type=Path, default=None, help="a .npz to keep A, B and the float64 product in")
    args = ap.parse_args()
    spec = yaml.safe_load((HERE / "tuning.yaml").read_text())
    if args.ref_cache and args.ref_cache.exists():
        data = np.load(args.ref_cache)
        A, B, ref = data["A"], data["B"], data["ref"]
    else:
        rng = np.random.default_rng(0)
        A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
        B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
        ref = (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)
        if args.ref_cache:
            np.savez(args.ref_cache, A=A, B=B, ref=ref)
    C = np.zeros((M, N), np.float32)
    random.seed(args.seed)  # Kernel Tuner's strategies draw from both generators
    np.random.seed(args.seed)
    options = {"time_limit": args.time_limit}
    if args.strategy == "random_sample":
        options["fraction"] = 1.0
    t0 = time.perf_counter()
    results, env = kernel_tuner.tune_kernel(
        "sgemm",
        str(HERE / "sgemm_large.cu"),
        (N, M),
        [A, B, C, np.int32(M), np.int32(N), np.int32(K)],
        spec["tune_params"],
        lang="nvcuda",
        grid_div_x=["BLOCK_SIZE_X", "TILE_SIZE_X"],
        grid_div_y=["BLOCK_SIZE_Y", "TILE_SIZE_Y"],
        restrictions=spec["restrictions"],
        answer=[None, None, ref, None, None, None],
        atol=TOLERANCE,
        strategy=args.strategy,
        strategy_options=options,
        iterations=args.iterations,
        compiler_options=["-std=c++17"],
        verbose=False,
        quiet=True,
        observers=[WallClock(t0)],
    )
    wall = time.perf_counter() - t0
    events = []
    last = 0.0
    for r in results:
        t = r.get("time")
        ok = isinstance(t, float) and math.isfinite(t)
        last = r.get("wall_s", last) or last
        events.append([round(last, 4), {k: r[k] for k in spec["tune_params"]}, round(t, 6) if ok else None])
    print(
        json.dumps(
            {
                "tool": f"kernel_tuner {kernel_tuner.__version__}",
                "strategy": args.strategy,
                "seed": args.seed,
                "wall_s": round(wall, 3),
                "evaluated": len(results),
                "events": events,
                "device": env.get("device_name"),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
