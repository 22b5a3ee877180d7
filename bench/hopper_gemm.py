"""The Hopper GEMM against cuBLAS, in one run on one GPU (an H200): bf16 inputs, fp32 accumulation
and output, C = A * B with B given as BT (problems/gemm_bf16), at 4096^3 and 8192^3.

    python bench/hopper_gemm.py [--example-s 90] [--simt-s 20] [--profile] [--out results.json]

Rows, per shape:
- cuBLAS through torch: torch.mm(A, BT.t(), out_dtype=float32) — the problem's reference — timed
  as ktt times a candidate: CUDA events around the call, the L2 flushed before each repetition
  (a 2x-L2 buffer written), the median of 30 after 5 warm-ups; the bf16-output product is shown too;
- the tuned example (problems/gemm_bf16/example: TMA + wgmma + mbarrier ring, clusters): `ktt tune`
  of the whole problem (both cases, `--example-s` seconds of search each), its best per case;
- the SIMT baseline (problems/gemm_bf16/baseline), the same way with `--simt-s`.
For each: ms, TFLOP/s (2*M*N*K / time) and the ratio to cuBLAS; for the tuned kernels ktt's search
time, configurations measured and valid, and the best configuration. `--profile` also runs
`ktt profile` on the example's best (n8192) and prints the tensor-pipe and TMA metrics it reports.
Everything runs in a copy of the problem under a temporary directory; the checkout is not written.
Needs a CUDA GPU of compute capability 9.0, torch with CUDA, and ncu for --profile.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBLEM = ROOT / "problems" / "gemm_bf16"
SHAPES = {"n4096": 4096, "n8192": 8192}
RUN_FILES = ("output", "archive", "output.lock", "inputs.hpp", "__pycache__")


def tflops(n: int, ms: float | None) -> float | None:
    return None if not ms else 2.0 * n**3 / (ms * 1e-3) / 1e12


def time_cublas(n: int, out_fp32: bool, reps: int = 30, warmup: int = 5) -> float:
    """Median ms of one product, L2 flushed before each repetition, as ktt times a candidate."""
    import torch

    gen = torch.Generator(device="cuda").manual_seed(n)
    a = (torch.rand(n, n, device="cuda", generator=gen) * 2 - 1).bfloat16()
    bt = (torch.rand(n, n, device="cuda", generator=gen) * 2 - 1).bfloat16()
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.empty(2 * l2 // 4, dtype=torch.float32, device="cuda")

    def call() -> torch.Tensor:
        return torch.mm(a, bt.t(), out_dtype=torch.float32) if out_fp32 else torch.mm(a, bt.t())

    for _ in range(warmup):
        call()
    times = []
    for _ in range(reps):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def ktt(*argv: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "ktt", *argv], capture_output=True, text=True, env=env,
                          timeout=timeout, check=False)  # fmt: skip


def tune(problem: Path, kernel: Path, spec: Path, out: Path, seconds: float) -> dict:
    """`ktt tune` of both cases; returns the summary (and the wall time)."""
    start = time.perf_counter()
    done = ktt("tune", "--problem", str(problem), "--kernel", str(kernel), "--spec", str(spec), "--output", str(out),
               "--duration", str(seconds), "--reference-time", str(out.parent / f"{out.name}_reference_time.json"),
               "--json", timeout=2 * len(SHAPES) * seconds + 600)  # fmt: skip
    wall = time.perf_counter() - start
    summary_path = out / "summary.json"
    if not summary_path.is_file():
        return {"ok": False, "message": (done.stderr or done.stdout)[-1500:], "wall": wall}
    summary = json.loads(summary_path.read_text())
    summary["wall"] = wall
    return summary


def case_row(summary: dict, shape: str) -> dict:
    for case in summary.get("cases") or []:  # CaseResult (ktt/protocol.py)
        if case.get("name") == shape:
            return case
    return {}


def profile(problem: Path, kernel: Path, spec: Path, tune_out: Path, out: Path) -> list[str]:
    summary = tune_out / "case_n8192" / "summary.json"
    if not summary.is_file():
        return [f"no n8192 summary at {summary}"]
    done = ktt("profile", "--problem", str(problem), "--kernel", str(kernel), "--spec", str(spec), "--from-summary",
               str(summary), "--shape", "n8192", "--output", str(out), "--json", timeout=600)  # fmt: skip
    report = out / "profile.json"
    if not report.is_file():
        return [f"ktt profile failed: {(done.stderr or done.stdout)[-600:]}"]
    lines = []
    for k in json.loads(report.read_text()).get("kernels", []):  # ProfileReport (ktt/protocol.py)
        for m in k.get("metrics", []):
            words = (m.get("name", "") + " " + m.get("label", "")).lower()
            if any(w in words for w in ("tensor", "pipe", "tma", "dram", "throughput")):
                value = f"{m.get('value')} {m.get('unit', '')}".strip()
                lines.append(f"{k.get('kernel', '?')}: {m.get('label')} ({m.get('name')}) = {value}")
    return lines or ["the profile reported no tensor-pipe or TMA metric"]


def fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--example-s", type=float, default=90.0, help="search seconds per case for the example")
    ap.add_argument("--simt-s", type=float, default=20.0, help="search seconds per case for the SIMT baseline")
    ap.add_argument("--profile", action="store_true", help="ncu profile of the example's best at 8192^3")
    ap.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = ap.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: this benchmark runs on a Hopper GPU", file=sys.stderr)
        return 3
    device = torch.cuda.get_device_name(0)
    cc = torch.cuda.get_device_capability(0)
    results: dict = {"device": device, "compute_capability": list(cc), "date": time.strftime("%Y-%m-%d %H:%M")}
    cublas = {s: {"fp32_out": time_cublas(n, True), "bf16_out": time_cublas(n, False)} for s, n in SHAPES.items()}
    torch.cuda.empty_cache()
    results["cublas_ms"] = cublas

    with tempfile.TemporaryDirectory(prefix="hopper-gemm-") as tmp:
        problem = Path(tmp) / "gemm_bf16"
        shutil.copytree(PROBLEM, problem, ignore=shutil.ignore_patterns(*RUN_FILES))
        runs = {
            "example": (problem / "example" / "kernels.cu", problem / "example" / "tuning.yaml", args.example_s),
            "simt": (problem / "baseline" / "kernels.cu", problem / "baseline" / "tuning.yaml", args.simt_s),
        }
        summaries = {name: tune(problem, k, s, Path(tmp) / name, secs) for name, (k, s, secs) in runs.items()}
        prof = profile(problem, *runs["example"][:2], Path(tmp) / "example", Path(tmp) / "prof") if args.profile else []

    results["tuned"] = {name: {shape: case_row(s, shape) for shape in SHAPES} | {"wall_s": s.get("wall")}
                        for name, s in summaries.items()}  # fmt: skip
    print(f"Hopper GEMM, bf16 in / fp32 accumulate and out, C = A * BT^T — {device} (sm_{cc[0]}{cc[1]}), "
          f"{results['date']}")  # fmt: skip
    print()
    print("| shape | kernel | ms | TFLOP/s | vs cuBLAS | ktt search s | measured / valid | best configuration |")
    print("|---|---|---|---|---|---|---|---|")
    for shape, n in SHAPES.items():
        base = cublas[shape]["fp32_out"]
        rest = "| 100 % | - | - | - |"
        print(f"| {shape} | cuBLAS (torch.mm, fp32 out) | {fmt(base)} | {fmt(tflops(n, base), 1)} {rest}")
        b16 = cublas[shape]["bf16_out"]
        print(f"| {shape} | cuBLAS (bf16 out) | {fmt(b16)} | {fmt(tflops(n, b16), 1)} | "
              f"{100 * base / b16:.0f} % | - | - | - |")  # fmt: skip
        for name, label in (("example", "TMA + wgmma example (tuned)"), ("simt", "SIMT baseline (tuned)")):
            case = case_row(summaries[name], shape)
            ms = case.get("time_ms")
            ratio = f"{100 * base / ms:.1f} %" if ms else "-"
            config = json.dumps(case.get("config")) if case.get("config") else case.get("status", "no result")
            print(f"| {shape} | {label} | {fmt(ms)} | {fmt(tflops(n, ms), 1)} | {ratio} | "
                  f"{fmt(case.get('search_s'), 1)} | {case.get('evaluated', '-')} / {case.get('valid', '-')} | "
                  f"{config} |")  # fmt: skip
    for name, s in summaries.items():
        if not s.get("ok"):
            print(f"\n{name}: ktt tune did not finish cleanly: {s.get('message', '')[:800]}")
        print(f"\n{name}: ktt tune wall {fmt(s.get('wall'), 0)} s (both cases, setup included), "
              f"reference {s.get('reference_source', '-')}, by status {s.get('by_status')}")  # fmt: skip
    if prof:
        print("\nProfile of the example's best at n8192 (ktt profile):")
        for line in prof:
            print(f"- {line}")
    results["profile"] = prof
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
