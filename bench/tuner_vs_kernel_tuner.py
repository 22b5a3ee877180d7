"""ktt against Kernel Tuner 1.5.0 on the shared GEMM space, in one run on one GPU.

    python bench/tuner_vs_kernel_tuner.py [--budget 45] [--out DIR] [--fidelity 5]
    python bench/tuner_vs_kernel_tuner.py --write-spec     # regenerate gemm_space/tuning.yaml

Both tools get the same wall-clock budget on the same space (random sampling over the
whole space for Kernel Tuner, ktt's auto strategy). Reported:
- configurations evaluated per second (each tool's own count over its own wall time);
- time to best (seconds from the tool's start until its final best was recorded);
- best time in the equal budget, each tool's own figure and both bests re-timed by ktt
  in one run (one clock, one method);
- GPU busy: NVML utilisation sampled every 0.1 s during each tool's run (the same meter
  for both), and ktt's own event-timed GPU spans / wall time;
- fidelity: ktt's median against Nsight Compute's gpu__time_duration (median of 5 runs) on
  5 configurations spread over ktt's results.
Prints a table of ratios against the targets and writes OUT/bench.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SPACE = HERE / "gemm_space"
PROBLEM = SPACE / "problem"
KERNEL = SPACE / "sgemm.cu"
SPEC = SPACE / "tuning.yaml"
sys.path.insert(0, str(ROOT))

# Issue 12 (compile throughput): >= 20x Kernel Tuner's configurations per second, GPU busy >= 90 %.
TARGETS = {"configs_per_s": 20.0, "gpu_busy": 0.90, "fidelity": 0.03}


def spec_text(space: dict[str, Any], restrictions: list[str] | None = None) -> str:
    lines = ["# Generated from space.json by bench/tuner_vs_kernel_tuner.py --write-spec.", "tune_params:"]
    for name, values in space["tune_params"].items():
        lines.append(f"  {name}: {json.dumps(values)}")
    lines.append("restrictions:")
    for r in restrictions if restrictions is not None else space["restrictions"]:
        lines.append(f"  - {json.dumps(r)}")
    lines += [
        "launches:",
        "  - kernel: sgemm",
        "    grid:",
        '      x: "(N + BLOCK_SIZE_X * TILE_SIZE_X - 1) / (BLOCK_SIZE_X * TILE_SIZE_X)"',
        '      y: "(M + BLOCK_SIZE_Y * TILE_SIZE_Y - 1) / (BLOCK_SIZE_Y * TILE_SIZE_Y)"',
        "    block: {x: BLOCK_SIZE_X, y: BLOCK_SIZE_Y}",
        "",
    ]
    return "\n".join(lines)


class NvmlSampler:
    """Mean GPU utilisation (% of time a kernel was running) while it runs; None without NVML."""

    def __init__(self, device: int = 0, period_s: float = 0.1) -> None:
        self.period_s = period_s
        self.samples: list[int] = []
        self.stamps: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(device)
        except Exception:
            self._nvml = None

    def __enter__(self) -> NvmlSampler:
        if self._nvml is not None:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            with contextlib.suppress(Exception):
                self.samples.append(int(self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu))
                self.stamps.append(time.time())

    def mean_between(self, start: float, end: float) -> float | None:
        """Mean utilisation over samples taken between two wall-clock times (the steady state)."""
        picked = [u for t, u in zip(self.stamps, self.samples, strict=False) if start <= t <= end]
        return statistics.fmean(picked) / 100 if picked else None

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.samples) / 100 if self.samples else None


def run_kernel_tuner(budget: float, fraction: float, log: Path) -> dict[str, Any]:
    cmd = [sys.executable, str(HERE / "kernel_tuner_run.py"), "--time-limit", str(budget), "--fraction", str(fraction)]
    with NvmlSampler() as nvml:
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=budget * 4 + 300)
        wall = time.perf_counter() - t0
    log.write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"Kernel Tuner failed (exit {proc.returncode}): {proc.stderr[-3000:]}")
    out = json.loads(lines[-1])
    out["process_wall_s"] = round(wall, 2)
    out["gpu_busy_nvml"] = nvml.mean
    return out


def compile_split(stdout: str, results: Path, nvml: NvmlSampler) -> dict[str, Any]:
    """Where ktt's wall time went: the compile pool's counts, start-up, steady state and tail."""
    split: dict[str, Any] = {}
    for line in stdout.splitlines():
        if line.startswith("{") and '"compile pool: ' in line:
            split["pool"] = json.loads(line)["message"]
    rows = [json.loads(ln) for ln in results.read_text().splitlines()] if results.exists() else []
    if rows:
        first, last = rows[0], rows[-1]
        split["first_result_s"] = first.get("elapsed_s")
        split["last_result_s"] = last.get("elapsed_s")
        gpu = sum(r.get("gpu_ms") or 0.0 for r in rows) / 1e3
        split["gpu_s_per_config"] = gpu / len(rows)
        split["gpu_bound_configs_per_s"] = len(rows) / gpu if gpu else None  # the GPU never idle
        split["gpu_busy_nvml_steady"] = nvml.mean_between(first.get("finished_at", 0), last.get("finished_at", 0))
        compiled = [r.get("compile_s") for r in rows if r.get("compile_s")]
        split["nvrtc_s_per_config"] = statistics.fmean(compiled) if compiled else None
    return split


def run_ktt(budget: float, out: Path, spec: Path = SPEC, extra: list[str] | None = None) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "ktt",
        "tune",
        "--problem",
        str(PROBLEM),
        "--kernel",
        str(KERNEL),
        "--spec",
        str(spec),
        "--output",
        str(out),
        "--duration",
        str(budget),
        "--json",
        "--reference-time",
        str(out / "reference_time.json"),
        *(extra or []),
    ]
    with NvmlSampler() as nvml:
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=max(budget, 60) * 4 + 300, cwd=ROOT)
        wall = time.perf_counter() - t0
    (out / "stdout.jsonl").write_text(proc.stdout)
    (out / "stderr.txt").write_text(proc.stderr)
    lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines or lines[-1].get("type") != "result":
        raise RuntimeError(f"ktt tune failed (exit {proc.returncode}): {proc.stderr[-3000:]} {proc.stdout[-2000:]}")
    summary = lines[-1]
    summary["process_wall_s"] = round(wall, 2)
    summary["gpu_busy_nvml"] = nvml.mean
    summary["split"] = compile_split(proc.stdout, out / "results.jsonl", nvml)
    return summary


def retime(configs: list[dict[str, int]], out: Path) -> list[float | None]:
    """Time the given configurations with ktt in one run (same clock and method for all)."""
    space = json.loads((SPACE / "space.json").read_text())
    clauses = [" && ".join(f"{k} == {v}" for k, v in c.items()) for c in configs]
    restriction = " || ".join(f"({c})" for c in clauses)
    spec = out / "retime.yaml"
    out.mkdir(parents=True, exist_ok=True)
    spec.write_text(spec_text(space, [restriction]))
    run_ktt(0, out, spec, ["--strategy", "exhaustive"])
    rows = [json.loads(ln) for ln in (out / "results.jsonl").read_text().splitlines()]
    times = []
    for c in configs:
        row = next((r for r in rows if all(r["config"].get(k) == v for k, v in c.items())), None)
        times.append(row["time_ms"] if row and row["status"] == "ok" else None)
    return times


def fidelity(results_file: Path, out: Path, n: int) -> list[dict[str, Any]]:
    from ktt.profile import ProfileOptions, ncu_durations

    rows = [json.loads(ln) for ln in results_file.read_text().splitlines()]
    ok = sorted((r for r in rows if r["status"] == "ok" and r.get("time_ms")), key=lambda r: r["time_ms"])
    if not ok:
        return []
    picks = sorted({round(i * (len(ok) - 1) / max(1, n - 1)) for i in range(n)})
    opts = ProfileOptions(problem_dir=PROBLEM, kernel=KERNEL, spec=SPEC, output=out)
    out.mkdir(parents=True, exist_ok=True)
    table = []
    for i in picks:
        row = ok[i]
        try:
            runs = ncu_durations(opts, row["config"], runs=5, warmup=2)
            ncu_ms = statistics.median(runs) if runs else None
        except Exception as exc:  # ncu missing or failing: report, do not abort the benchmark
            table.append({"config": row["config"], "ktt_ms": row["time_ms"], "ncu_ms": None, "error": str(exc)[-500:]})
            continue
        table.append(
            {
                "config": row["config"],
                "ktt_ms": row["time_ms"],
                "ncu_ms": ncu_ms,
                "ncu_runs": runs,
                "rel_diff": (row["time_ms"] - ncu_ms) / ncu_ms if ncu_ms else None,
            }
        )
    return table


def fmt(v: Any, spec: str = ".3g") -> str:
    return "-" if v is None else format(v, spec)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", type=float, default=45.0, help="wall-clock seconds for each tool")
    ap.add_argument("--fraction", type=float, default=1.0, help="Kernel Tuner random_sample fraction of the space")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp")) / "bench")
    ap.add_argument("--fidelity", type=int, default=5, help="configurations for the ncu check (0: skip)")
    ap.add_argument("--skip-kernel-tuner", action="store_true")
    ap.add_argument("--write-spec", action="store_true", help="write gemm_space/tuning.yaml and exit")
    args = ap.parse_args()
    space = json.loads((SPACE / "space.json").read_text())
    if args.write_spec:
        SPEC.write_text(spec_text(space))
        print(f"wrote {SPEC}")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"budget_s": args.budget, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}

    kt = None
    if not args.skip_kernel_tuner:
        kt = run_kernel_tuner(args.budget, args.fraction, args.out / "kernel_tuner.log")
        report["kernel_tuner"] = kt
        print("kernel_tuner:", json.dumps(kt), flush=True)
    ours_dir = args.out / "ktt"
    ours_dir.mkdir(parents=True, exist_ok=True)
    # A cold compile cache of its own: Kernel Tuner caches nothing, and a warm cache would flatter us.
    ours = run_ktt(args.budget, ours_dir, extra=["--cache-dir", str(args.out / "ktt_cache")])
    report["ktt"] = {
        k: ours.get(k)
        for k in (
            "evaluated",
            "valid",
            "wall_s",
            "search_s",
            "configs_per_s",
            "strategy",
            "time_to_best_s",
            "gpu_busy_s",
            "compile_s_total",
            "process_wall_s",
            "gpu_busy_nvml",
            "restricted_size",
            "by_status",
            "device",
            "split",
        )
    }
    best = ours.get("best") or {}
    report["ktt"]["best_ms"] = best.get("time_ms")
    report["ktt"]["best"] = best.get("config")
    print("ktt:", json.dumps(report["ktt"]), flush=True)

    if kt and kt.get("best") and best.get("config"):
        t_ours, t_kt = retime([best["config"], kt["best"]], args.out / "retime")
        report["retimed_by_ktt"] = {"ktt_best_ms": t_ours, "kernel_tuner_best_ms": t_kt}
    if args.fidelity:
        report["fidelity"] = fidelity(ours_dir / "results.jsonl", args.out / "ncu", args.fidelity)

    # The table.
    ours_rate = ours["evaluated"] / ours["wall_s"] if ours.get("wall_s") else None
    rows = []
    if kt:
        rate_ratio = ours_rate / kt["configs_per_s"] if ours_rate and kt["configs_per_s"] else None
        rows.append(
            (
                "configs/s (each tool's wall)",
                fmt(ours_rate),
                fmt(kt["configs_per_s"]),
                fmt(rate_ratio),
                f">= {TARGETS['configs_per_s']:g}x",
                rate_ratio is not None and rate_ratio >= TARGETS["configs_per_s"],
            )
        )
        rows.append(("time to best (s)", fmt(ours.get("time_to_best_s")), fmt(kt.get("time_to_best_s")), "", "", None))
        rt = report.get("retimed_by_ktt", {})
        a, b = rt.get("ktt_best_ms"), rt.get("kernel_tuner_best_ms")
        rows.append(
            ("best, own figure (ms)", fmt(best.get("time_ms"), ".4g"), fmt(kt.get("best_ms"), ".4g"), "", "", None)
        )
        ok_best = a is not None and b is not None and a <= b * 1.01
        rows.append(
            (
                "best, both re-timed by ktt (ms)",
                fmt(a, ".4g"),
                fmt(b, ".4g"),
                fmt(b / a if a and b else None),
                "ours <= peer",
                ok_best if a and b else None,
            )
        )
        rows.append(
            (
                "GPU busy (NVML)",
                fmt(ours.get("gpu_busy_nvml"), ".0%"),
                fmt(kt.get("gpu_busy_nvml"), ".0%"),
                "",
                f">= {TARGETS['gpu_busy']:.0%}",
                (ours.get("gpu_busy_nvml") or 0) >= TARGETS["gpu_busy"],
            )
        )
    sp = ours.get("split") or {}
    if sp:
        steady = fmt(sp.get("gpu_busy_nvml_steady"), ".0%")
        rows.append(("GPU busy (NVML), first to last result", steady, "", "", "", None))
        rows.append(("start-up before the first result (s)", fmt(sp.get("first_result_s")), "", "", "", None))
        rows.append(("NVRTC s per configuration (pool)", fmt(sp.get("nvrtc_s_per_config")), "", "", "", None))
        rows.append(("GPU s per configuration (spans)", fmt(sp.get("gpu_s_per_config")), "", "", "", None))
        ceiling = sp.get("gpu_bound_configs_per_s")
        kt_rate = kt["configs_per_s"] if kt else None
        ratio = fmt(ceiling / kt_rate if ceiling and kt_rate else None)
        rows.append(("configs/s if the GPU never idled", fmt(ceiling), "", ratio, "", None))
    busy_events = ours["gpu_busy_s"] / ours["wall_s"] if ours.get("wall_s") else None
    rows.append(
        (
            "GPU busy (ktt events / wall)",
            fmt(busy_events, ".0%"),
            "",
            "",
            f">= {TARGETS['gpu_busy']:.0%}",
            busy_events is not None and busy_events >= TARGETS["gpu_busy"],
        )
    )
    fid = [f for f in report.get("fidelity", []) if f.get("rel_diff") is not None]
    if fid:
        worst = max(abs(f["rel_diff"]) for f in fid)
        rows.append(
            (f"median vs ncu, worst of {len(fid)}", fmt(worst, ".2%"), "", "", "<= 3%", worst <= TARGETS["fidelity"])
        )
        report["fidelity_worst"] = worst
    report["table"] = [
        {"figure": r[0], "ktt": r[1], "kernel_tuner": r[2], "ratio": r[3], "target": r[4], "met": r[5]} for r in rows
    ]
    (args.out / "bench.json").write_text(json.dumps(report, indent=2))
    print()
    print(f"{'figure':40s} {'ktt':>10s} {'KT 1.5.0':>10s} {'ratio':>8s}  {'target':14s} met")
    for r in rows:
        met = {True: "yes", False: "NO", None: ""}[r[5]]
        print(f"{r[0]:40s} {r[1]:>10s} {r[2]:>10s} {r[3]:>8s}  {r[4]:14s} {met}")
    if sp.get("pool"):
        print(sp["pool"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
