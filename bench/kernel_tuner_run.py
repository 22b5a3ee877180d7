"""Kernel Tuner 1.5.0 on bench/gemm_space, as ../shared/bench/gemm_space/kernel_tuner_baseline.py runs it,
plus a wall-clock stamp on every result (to measure time to best) and the random_sample fraction as an option.

Prints one JSON line of figures. Run by bench/tuner_vs_kernel_tuner.py; needs kernel_tuner installed.
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import time

import kernel_tuner
import numpy as np
from kernel_tuner_harness import WallClock, patch_launch_check  # bench/, this script's folder

patch_launch_check()  # cuda-bindings 13's 1-tuples (see kernel_tuner_harness)

here = pathlib.Path(__file__).parent / "gemm_space"
spec = json.loads((here / "space.json").read_text())
ap = argparse.ArgumentParser()
ap.add_argument("--strategy", default="random_sample")
ap.add_argument("--time-limit", type=float, default=240)
ap.add_argument("--fraction", type=float, default=0.1)
ap.add_argument("--iterations", type=int, default=7)
args = ap.parse_args()

M, N, K = (spec["sizes"][k] for k in "MNK")
rng = np.random.default_rng(0)
A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
C = np.zeros((M, N), np.float32)
ref = (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)

options = None if args.strategy == "brute_force" else {"time_limit": args.time_limit, "fraction": args.fraction}
T0 = time.perf_counter()
results, env = kernel_tuner.tune_kernel(
    "sgemm",
    str(here / "sgemm.cu"),
    (N, M),
    [A, B, C, np.int32(M), np.int32(N), np.int32(K)],
    spec["tune_params"],
    lang="nvcuda",
    grid_div_x=["BLOCK_SIZE_X", "TILE_SIZE_X"],
    grid_div_y=["BLOCK_SIZE_Y", "TILE_SIZE_Y"],
    restrictions=spec["restrictions"],
    answer=[None, None, ref, None, None, None],
    atol=spec["tolerance_abs"],
    strategy=args.strategy,
    strategy_options=options,
    iterations=args.iterations,
    compiler_options=["-std=c++17"],
    verbose=False,
    quiet=True,
    observers=[WallClock(T0)],
)
wall = time.perf_counter() - T0
valid = [r for r in results if isinstance(r.get("time"), float) and math.isfinite(r["time"])]
best = min(valid, key=lambda r: r["time"]) if valid else None
print(
    json.dumps(
        {
            "tool": f"kernel_tuner {kernel_tuner.__version__}",
            "strategy": args.strategy,
            "fraction": args.fraction,
            "evaluated": len(results),
            "valid": len(valid),
            "wall_s": round(wall, 2),
            "configs_per_s": round(len(results) / wall, 3),
            "best_ms": best and round(best["time"], 5),
            "best": best and {k: best[k] for k in spec["tune_params"]},
            "time_to_best_s": best and round(best.get("wall_s", float("nan")), 2),
            "seconds_in": {
                k: round(sum(r.get(k, 0) or 0 for r in results) / 1000, 2)
                for k in ("compile_time", "verification_time", "benchmark_time", "framework_time", "strategy_time")
            },
            "device": env.get("device_name"),
        }
    )
)
