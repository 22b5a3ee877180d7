"""Suite throughput on 2 GPUs vs 1: every shipped problem's example kernel tuned by ``ktt tune``,
placed on GPUs by the same slot pool ``cacao suite`` uses (cacao_tui.suite.slots).

Why ktt tune jobs and not a replayed ``cacao suite``: a suite's wall time is its longest run
(mmul's recorded session has more iterations than the others), plus Nsight Compute profiling and
the LLM side, none of which is GPU throughput; jobs of equal budgets measure the GPU work that the
suite's slots spread over the GPUs. ``scripts/suite-gpu.sh suite`` runs the real suite.

Phases (each job: one problem's example kernel, one seed, a fixed tuning budget):
  warm-up  one short job per problem measures its reference time once (not timed),
  1 GPU    every job on GPU 0, one after another,
  2 GPUs   the same jobs on GPUs 0 and 1, each job on whichever comes free first.
Throughput = configurations evaluated / wall seconds; the target is >= 1.8x on 2 GPUs. Every job
gets the same compiler processes in both phases (half the cores, less one), so the comparison is of
GPUs, not of cores. Default: the shipped problems (5) x 2 seeds x 6 s a case (stencil has 3 cases,
multipass_sum 2), about 4 minutes of device time.

    python bench/suite_two_gpus.py [--duration 6] [--seeds 2] [--problems NAME...] [--out DIR]
    python bench/suite_two_gpus.py --dry-run      # no GPU: the same jobs as compile checks (ktt check)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cacao_tui.suite.slots import Slot, SlotPool, local_gpu_slots  # noqa: E402

PROBLEMS = tuple(sorted(p.name for p in (ROOT / "problems").iterdir() if (p / "example" / "kernels.cu").is_file()))


@dataclass
class Job:
    problem: Path
    seed: int
    out: Path
    gpu: str = ""
    evaluated: int = 0
    valid: int = 0
    seconds: float = 0.0
    exit_code: int | None = None
    best_ms: float | None = None

    @property
    def name(self) -> str:
        return f"{self.problem.name}#{self.seed}"


async def run_job(job: Job, slot: Slot, duration: float, workers: int, reference: Path, log: list[str],
                  dry_run: bool = False) -> None:  # fmt: skip
    device = slot.flags[1]
    job.gpu = slot.label
    example = job.problem / "example"
    files = ["--problem", str(job.problem), "--kernel", str(example / "kernels.cu"),
             "--spec", str(example / "tuning.yaml")]  # fmt: skip
    if dry_run:  # the job's compile check instead of its tuning: the plumbing, without a GPU
        argv = [sys.executable, "-m", "ktt", "check", *files, "--sample", "2", "--seed", str(job.seed)]
    else:
        argv = [sys.executable, "-m", "ktt", "tune", *files,
                "--output", str(job.out), "--duration", f"{duration:g}", "--seed", str(job.seed), "--device", device,
                "--reference-time", str(reference), "--compile-workers", str(workers), "--json"]  # fmt: skip
    start = time.monotonic()
    line = f"  {job.name:<14} -> {slot.label} of {socket.gethostname()}"
    log.append(line)
    print(line, flush=True)
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await proc.communicate()
    job.exit_code = proc.returncode
    job.seconds = time.monotonic() - start
    (job.out / "tune.log").parent.mkdir(parents=True, exist_ok=True)
    (job.out / "tune.log").write_bytes(out[-200_000:])
    summary = job.out / "summary.json"
    if summary.exists():
        data = json.loads(summary.read_text())
        job.evaluated, job.valid = int(data.get("evaluated") or 0), int(data.get("valid") or 0)
        job.best_ms = (data.get("best") or {}).get("time_ms")


async def phase(jobs: list[Job], gpus: list[int], duration: float, workers: int, refs: dict[str, Path],
                log: list[str], dry_run: bool = False) -> float:  # fmt: skip
    pool = SlotPool(local_gpu_slots(gpus))

    async def one(job: Job) -> None:
        async with pool.acquire() as slot:
            await run_job(job, slot, duration, workers, refs[job.problem.name], log, dry_run)

    start = time.monotonic()
    await asyncio.gather(*(one(j) for j in jobs))
    return time.monotonic() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=6.0, help="tuning budget of each case of a job, s (default 6)")
    ap.add_argument("--seeds", type=int, default=2, help="jobs per problem (default 2; keep the job count even)")
    ap.add_argument("--problems", nargs="*", default=list(PROBLEMS))
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/suite-two-gpus")))
    ap.add_argument("--dry-run", action="store_true", help="no GPU: compile-check each job instead of tuning it")
    args = ap.parse_args()
    unknown = sorted(set(args.problems) - set(PROBLEMS))
    if unknown:
        print(f"suite_two_gpus: --problems: no example kernel for {', '.join(unknown)} "
              f"(choose from {', '.join(PROBLEMS)})", file=sys.stderr)  # fmt: skip
        return 2
    from cacao_tui.engine.gpu import detect_gpus

    gpus = [0, 1] if args.dry_run else [g.index for g in detect_gpus()]
    if len(gpus) < 2:
        print(f"suite_two_gpus: needs 2 GPUs, found {len(gpus)} (nvidia-smi); --dry-run runs without",
              file=sys.stderr)  # fmt: skip
        return 2
    workers = max(1, (os.cpu_count() or 2) // 2 - 1)
    work = Path(tempfile.mkdtemp(prefix="suite-two-gpus-"))
    problems = []
    for name in args.problems:
        target = work / "problems" / name
        shutil.copytree(ROOT / "problems" / name, target,
                        ignore=shutil.ignore_patterns("output", "archive", "output.lock", "inputs.hpp"))  # fmt: skip
        problems.append(target)
    refs = {p.name: work / "refs" / p.name / "reference_time.json" for p in problems}
    for r in refs.values():
        r.parent.mkdir(parents=True, exist_ok=True)
    log: list[str] = []
    print(f"warm-up: one short job per problem measures its reference time ({len(problems)} jobs, 2 GPUs)")
    warm = [Job(p, 0, work / "warm" / p.name) for p in problems]
    asyncio.run(phase(warm, gpus[:2], 1.0, workers, refs, log, args.dry_run))
    rows = []
    for n in (1, 2):
        print(f"{n} GPU(s):")
        jobs = [Job(p, s, work / f"gpus{n}" / f"{p.name}-{s}") for p in problems for s in range(args.seeds)]
        wall = asyncio.run(phase(jobs, gpus[:n], args.duration, workers, refs, log, args.dry_run))
        configs = sum(j.evaluated for j in jobs)
        failed = [j.name for j in jobs if j.exit_code != 0]
        per_job = [
            {"job": j.name, "gpu": j.gpu, "s": round(j.seconds, 2), "evaluated": j.evaluated, "valid": j.valid,
             "best_ms": j.best_ms, "exit": j.exit_code}
            for j in jobs
        ]  # fmt: skip
        rows.append({"gpus": n, "jobs": len(jobs), "wall_s": wall, "configs": configs, "configs_per_s": configs / wall,
                     "jobs_per_min": 60 * len(jobs) / wall, "failed": failed, "per_job": per_job})  # fmt: skip
    ratio = rows[1]["configs_per_s"] / rows[0]["configs_per_s"] if rows[0]["configs_per_s"] else float("nan")
    wall_ratio = rows[0]["wall_s"] / rows[1]["wall_s"]
    table = [f"{'GPUs':>4}  {'jobs':>4}  {'wall s':>7}  {'configs':>7}  {'configs/s':>9}  {'jobs/min':>8}  failed"]
    for r in rows:
        failed = ",".join(r["failed"]) or "-"
        table.append(f"{r['gpus']:>4}  {r['jobs']:>4}  {r['wall_s']:>7.1f}  {r['configs']:>7}  "
                     f"{r['configs_per_s']:>9.1f}  {r['jobs_per_min']:>8.2f}  {failed}")  # fmt: skip
    if args.dry_run:
        table.append("dry run: each job was a compile check (ktt check), nothing was timed; no throughput measured")
    else:
        verdict = "meets" if ratio >= 1.8 else "MISSES"
        table.append(f"throughput 2 GPUs / 1 GPU: {ratio:.2f}x configs/s, {wall_ratio:.2f}x wall "
                     f"({verdict} the 1.8x target)")  # fmt: skip
    table.append(f"budget {args.duration:g} s per job, {workers} compiler processes per job, {os.cpu_count()} cores")
    print("\n".join(table))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "suite_two_gpus.json").write_text(json.dumps({"rows": rows, "ratio": ratio, "wall_ratio": wall_ratio,
                                                              "placements": log}, indent=2))  # fmt: skip
    (args.out / "suite_two_gpus.txt").write_text("\n".join(log + table) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    return 0 if not any(r["failed"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
