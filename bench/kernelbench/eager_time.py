"""Time an imported problem's reference, torch eager, the way KernelBench's harness times it.

    python3 bench/kernelbench/eager_time.py PROBLEM_DIR [TRIALS]

Loads the problem's ref.py (the module's source and cacao import's entry points), builds input
set 0 as the tuner does (ktt.inputs), prepares the model on the GPU, then times the forward with
CUDA events: 3 warm-up calls, then TRIALS (default 100) calls, each after a device synchronise and
an L2 flush (a 256 MB write), the mean in ms, as KernelBench's cuda_event timing. Prints one JSON
line: {"problem", "mean_ms", "median_ms", "min_ms", "trials", "device"}. A cross-check of the
denominator ktt measures itself (CUDA events, warm, the minimum of 5 calls after 5 warm-ups).
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
from pathlib import Path

import torch

from ktt.inputs import make_inputs
from ktt.problem import load_problem


def main() -> int:
    directory = Path(sys.argv[1])
    trials = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    problem = load_problem(directory)
    spec = importlib.util.spec_from_file_location("cacao_kb_ref", directory / "ref.py")
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    inputs = make_inputs(problem, problem.primary, 0, 0, directory / "output" / "eager_time")
    prepared = ref.prepare_input(dict(problem.primary.scalars), inputs)
    flush = torch.empty(32 * 1024 * 1024, dtype=torch.int64, device="cuda")
    for _ in range(3):
        ref.cacao_reference(prepared)
    torch.cuda.synchronize()
    times = []
    for _ in range(trials):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        flush.fill_(42)
        start.record()
        ref.cacao_reference(prepared)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    doc = {"problem": problem.name, "mean_ms": statistics.fmean(times), "median_ms": statistics.median(times),
           "min_ms": min(times), "trials": trials, "device": torch.cuda.get_device_name()}  # fmt: skip
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
