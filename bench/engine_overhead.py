"""Engine overhead per iteration, with zero-latency fakes (target: <= 20 ms per iteration).

The model is the scripted FAKE provider and the tuner is the FAKE tuner, both answering at
once, so what is left is the engine itself: state files (atomic writes with fsync), call
records, prompts, events, the run log and the scheduling of the branch tasks.

    python bench/engine_overhead.py [--branches 8] [--iterations 10] [--repeats 3] [--counts]
                                    [--profile N]

Prints a table: wall time, iterations, ms per iteration (median of the repeats) and the CPU
time of the process per iteration (user + system: what is left of the wall time is waiting,
mostly for fsync). With ``--counts``, one more run (not timed) counts the engine's file traffic
per iteration: fsyncs (one per atomic write) and the time spent in them, files opened for
reading (by open() and by os.open(), the capped state reader), and the most read file names.
With ``--profile N``, one more run (not timed) under cProfile prints the N functions with the
most own time and the N with the most cumulative time, per iteration: where the CPU goes on the
machine at hand (the H200's host spends about three times this VM's CPU on an iteration).

The run's files go under $TMPDIR: ``TMPDIR=/dev/shm`` (a tmpfs) leaves the disk out and
measures the engine's CPU alone, which is what a loaded machine's disk hides.
"""

from __future__ import annotations

import argparse
import asyncio
import builtins
import cProfile
import io
import json
import os
import pstats
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cacao_tui.engine.engine import Engine  # noqa: E402
from cacao_tui.engine.events import EventBus  # noqa: E402
from cacao_tui.engine.scheduler import GpuScheduler  # noqa: E402
from cacao_tui.llm import ChatRequest, ScriptedProvider, TrackedLLM  # noqa: E402
from cacao_tui.nodes.context import RunDeps  # noqa: E402
from cacao_tui.settings import DEFAULTS  # noqa: E402
from cacao_tui.store.layout import RunLayout  # noqa: E402
from cacao_tui.store.state import GpuInfo, RunSettings  # noqa: E402
from ktt.problem import load_problem  # noqa: E402
from tests.fake_tuner import FakeTuner  # noqa: E402

SPEC = "tune_params:\n  P: [1, 2]\nlaunches:\n  - kernel: k\n    grid: {x: 1}\n    block: {x: P}\n"


def respond(n_branches: int):
    def answer(request: ChatRequest) -> object:
        k = request.key
        if k.node == "analyze":
            return "analysis"
        if k.node == "strategize":
            items = [{"name": f"s{i}", "title": f"S{i}", "description": "d"} for i in range(n_branches)]
            return json.dumps({"strategies": items})
        if k.node in ("plan", "propose"):
            return f"{k.node} text"
        if k.node == "decide":
            return json.dumps({"action": "continue", "reason": "more"})
        if k.index == 0:
            src = f'// FAKE_TIME_MS: {1.0 / (k.iteration or 1)}\nextern "C" __global__ void k(float* a) {{}}\n'
            return {
                "tool_calls": [
                    {"id": "a", "name": "write_file", "arguments": {"path": "kernels.cu", "content": src}},
                    {"id": "b", "name": "write_file", "arguments": {"path": "tuning.yaml", "content": SPEC}},
                    {"id": "c", "name": "check_compilation", "arguments": {}},
                ]
            }
        return {"tool_calls": [{"id": "e", "name": "end_step", "arguments": {"summary": "ok"}}]}

    return answer


async def one_run(problem_dir: Path, branches: int, iterations: int) -> tuple[float, int]:
    problem = load_problem(problem_dir)
    layout = RunLayout(problem.directory)
    llm = TrackedLLM(ScriptedProvider(respond(branches)), record_root=layout.output)
    settings = RunSettings(
        max_iter=iterations, max_depth=0, n_strategies=branches, provider="scripted", model="scripted"
    )
    deps = RunDeps(
        problem=problem,
        layout=layout,
        llm=llm,
        tuner=FakeTuner(),
        settings=settings,  # type: ignore[arg-type]
        defaults=DEFAULTS,
        gpu=GpuInfo(name="fake"),
        devices=GpuScheduler([0]),
    )
    engine = Engine(deps, EventBus(), concurrency=branches)
    start = time.perf_counter()
    finished = await engine.run()
    wall = time.perf_counter() - start
    assert finished.status == "ok", finished
    return wall, branches * iterations


def count_traffic(problem_dir: Path, branches: int, iterations: int) -> tuple[Counter[str], Counter[str], int, float]:
    """One run with os.fsync, open() and os.open() counted: (per kind, reads per file name,
    iterations, seconds inside fsync)."""
    kinds: Counter[str] = Counter()
    names: Counter[str] = Counter()
    fsync_s = 0.0
    real_fsync, real_open, real_os_open = os.fsync, builtins.open, os.open

    def fsync(fd: int) -> None:
        nonlocal fsync_s
        kinds["fsync (atomic writes)"] += 1
        start = time.perf_counter()
        real_fsync(fd)
        fsync_s += time.perf_counter() - start

    def opened(file, mode="r", *args, **kwargs):  # type: ignore[no-untyped-def]
        if isinstance(file, str | os.PathLike) and not any(c in mode for c in "wax+"):
            kinds["files opened to read"] += 1
            names[Path(file).name] += 1
        return real_open(file, mode, *args, **kwargs)

    def os_opened(path, flags, *args, **kwargs):  # type: ignore[no-untyped-def]
        if isinstance(path, str | os.PathLike) and not flags & (os.O_WRONLY | os.O_RDWR):
            kinds["files opened to read"] += 1
            names[Path(path).name] += 1
        return real_os_open(path, flags, *args, **kwargs)

    os.fsync, builtins.open, io.open, os.open = fsync, opened, opened, os_opened  # type: ignore[assignment]
    try:
        _, n = asyncio.run(one_run(problem_dir, branches, iterations))
    finally:
        os.fsync, builtins.open, io.open, os.open = real_fsync, real_open, real_open, real_os_open  # type: ignore[assignment]
    return kinds, names, n, fsync_s


def fresh_copy(tmp: str) -> Path:
    target = Path(tmp) / "mmul"
    shutil.copytree(ROOT / "problems" / "mmul", target, ignore=shutil.ignore_patterns("output", "archive"))
    return target


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--branches", type=int, default=8)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--counts", action="store_true", help="also count fsyncs and file reads per iteration")
    ap.add_argument(
        "--profile", type=int, default=0, metavar="N", help="also print the top N functions of a profiled run"
    )
    args = ap.parse_args()
    per_iter: list[float] = []
    walls: list[float] = []
    cpu: list[float] = []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            problem_dir = fresh_copy(tmp)
            before = resource.getrusage(resource.RUSAGE_SELF)
            wall, n = asyncio.run(one_run(problem_dir, args.branches, args.iterations))
            after = resource.getrusage(resource.RUSAGE_SELF)
            walls.append(wall)
            per_iter.append(wall / n * 1000)
            used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            cpu.append(used / n * 1000)
    ms = statistics.median(per_iter)
    head = f"{'branches':>9} {'iters':>6} {'wall s (median)':>16} {'ms/iteration':>13} {'cpu ms/iter':>12}"
    print(f"{head} {'target':>8} {'ok':>4}")
    print(
        f"{args.branches:>9} {args.branches * args.iterations:>6} {statistics.median(walls):>16.2f} "
        f"{ms:>13.1f} {statistics.median(cpu):>12.1f} {'<= 20':>8} {'yes' if ms <= 20 else 'NO':>4}"
    )
    print(
        f"(repeats: {', '.join(f'{v:.1f}' for v in per_iter)} ms/iteration; one iteration = plan, authoring "
        "(2 model calls, 3 tools, a compile check), tune, profile, propose, decide)"
    )
    if args.counts:
        with tempfile.TemporaryDirectory() as tmp:
            kinds, names, n, fsync_s = count_traffic(fresh_copy(tmp), args.branches, args.iterations)
        print(
            "per iteration: " + ", ".join(f"{k} {v / n:.1f}" for k, v in sorted(kinds.items()))
            + f", time in fsync {fsync_s / n * 1000:.1f} ms"
        )
        print("most read: " + ", ".join(f"{name} {v / n:.1f}" for name, v in names.most_common(6)))
    if args.profile > 0:
        print_profile(args.branches, args.iterations, args.profile)
    return 0


def print_profile(branches: int, iterations: int, top: int) -> None:
    """One run under cProfile: the top functions by own and by cumulative time, ms per iteration."""
    profiler = cProfile.Profile()
    with tempfile.TemporaryDirectory() as tmp:
        problem_dir = fresh_copy(tmp)
        profiler.enable()
        _, n = asyncio.run(one_run(problem_dir, branches, iterations))
        profiler.disable()
    stats = pstats.Stats(profiler)
    rows = stats.stats  # type: ignore[attr-defined]
    total = sum(tt for _, _, tt, _, _ in rows.values())
    print(f"profiled run: {total / n * 1000:.1f} ms of CPU an iteration under cProfile (its own cost included)")
    for title, index in (("own time", 2), ("cumulative time", 3)):
        print(f"top {top} by {title} (ms / iteration, calls / iteration, function):")
        ranked = sorted(rows.items(), key=lambda kv: kv[1][index], reverse=True)[:top]
        for (file, line, name), (_, calls, tt, ct, _) in ranked:
            where = f"{Path(file).parent.name}/{Path(file).name}:{line}" if line else file
            print(f"  {(tt if index == 2 else ct) / n * 1000:8.3f} {calls / n:9.1f}  {name} ({where})")


if __name__ == "__main__":
    raise SystemExit(main())
