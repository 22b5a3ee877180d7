"""Where a configuration's NVRTC time goes, and what the compile path does about it (no GPU needed).

    python bench/compile_throughput.py [--examples gemm,cub] [--configs 24] [--workers N] [--out DIR]

For each example (bench/gemm_space: the shared GEMM; bench/cub_reduce: a kernel that
includes <cub/block/block_reduce.cuh>), on a seeded sample of its valid configurations:

1. NVRTC's own phase split (``--time``): front end (parsing, templates), NVVM optimiser,
   PTX to SASS (ptxas), in ms per configuration, without and with a precompiled header;
2. per-configuration cost, one process, one compile at a time, CPU seconds (robust to a
   loaded machine) and wall: the raw NVRTC call, ktt's full path as before (include check,
   Landlock sandbox, cache write), and ktt's path with a precompiled header (ktt.pch; its
   one-off creation shown on its own);
3. duplicates: how many configurations of the whole space compile the same program as
   another (a parameter the source never reads, ktt.compile_cache.effective_request);
4. the compile pool (ktt.compile_pool) on a cold cache with N workers, without and with
   precompiled headers: configurations per second and what the pool counted.

Prints one table per example and writes OUT/compile_throughput.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from ktt import nvrtc, pch  # noqa: E402
from ktt.candidates import CompileContext, KernelSource  # noqa: E402
from ktt.compile_cache import cache_key, compile_cached, effective_request  # noqa: E402
from ktt.compile_pool import CompilePool, default_workers  # noqa: E402
from ktt.problem import load_problem  # noqa: E402
from ktt.space import SearchSpace  # noqa: E402
from ktt.spec import load_spec  # noqa: E402
from ktt.workdir import WorkDir  # noqa: E402

EXAMPLES = {
    "gemm": (HERE / "gemm_space" / "problem", HERE / "gemm_space" / "sgemm.cu", HERE / "gemm_space" / "tuning.yaml"),
    "cub": (HERE / "cub_reduce", HERE / "cub_reduce" / "kernels.cu", HERE / "cub_reduce" / "tuning.yaml"),
}
ARCH = "sm_90"


def requests(name: str, work: Path, n: int, seed: int, arch: str = ARCH) -> tuple[list, int, int]:
    """(requests for n sampled configurations, distinct programs in the whole space, space size)."""
    problem_dir, kernel, spec_path = EXAMPLES[name]
    problem = load_problem(problem_dir)
    spec = load_spec(spec_path, problem)
    shape = problem.primary
    space = SearchSpace(spec.tune_params, spec.restrictions, shape.scalars)
    keys = space.enumerate(200_000) or []
    ctx = CompileContext(problem, spec, KernelSource.read(kernel), WorkDir(work), arch)
    ctx._inputs_hpp(shape)
    all_reqs = [ctx.request(space.config(k), shape) for k in keys]
    distinct = len({cache_key(effective_request(r)) for r in all_reqs})
    picked = random.Random(seed).sample(all_reqs, min(n, len(all_reqs)))
    return picked, distinct, len(all_reqs)


def raw_compile(source: str, req: Any, extra: list[bytes], defines: bool = True) -> tuple[bool, dict[str, float]]:
    """NVRTC through its API, unsandboxed, with ``--time``: (ok, {phase: ms})."""
    with tempfile.TemporaryDirectory() as d:
        timing = os.path.join(d, "time.csv")
        opts = nvrtc.option_bytes(req) if defines else nvrtc._pch_options(req)
        opts += [*extra, f"--time={timing}".encode()]
        cubin, _, _ = nvrtc._nvrtc_compile(source, req.program_path, opts, pch.HEAP_BYTES)
        return cubin is not None, read_phases(timing)


def read_phases(path: str) -> dict[str, float]:
    """NVRTC's ``--time`` CSV: ms per phase (front end, NVVM optimiser, PTX translation), summed."""
    phases: dict[str, float] = {}
    with contextlib.suppress(OSError):
        for line in Path(path).read_text().splitlines()[1:]:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) >= 4:
                with contextlib.suppress(ValueError):
                    phases[parts[1]] = phases.get(parts[1], 0.0) + float(parts[2])
    return phases


def timed(fn: Any) -> tuple[Any, float, float]:
    c0, w0 = time.process_time(), time.perf_counter()
    value = fn()
    return value, time.process_time() - c0, time.perf_counter() - w0


def mean(xs: list[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def phase_split(reqs: list, store: str) -> dict[str, Any]:
    """Mean ms per phase over the sample: ordinary, and (when the kernel qualifies) with a precompiled header."""
    out: dict[str, Any] = {"ordinary": {}, "pch": None}
    rows = []
    for r in reqs:
        ok, ph = raw_compile(r.source, r, [])
        if ok:
            rows.append(ph)
    out["ordinary"] = {k: mean([p.get(k, 0.0) for p in rows]) for k in (rows[0] if rows else {})}
    r0 = reqs[0]
    moved = tuple(d for d in r0.defines if d[0] not in r0.fixed_defines)
    plan = pch.plan(r0.source, moved, r0.header_texts, r0.arch, nvrtc._pch_options(r0), store)
    if plan is None:
        return out
    opts = [*nvrtc._pch_options(r0), f"--create-pch={plan.tmp}".encode()]
    head = pch.header_only(plan)
    (_, _, needed), cpu, wall = timed(lambda: nvrtc._nvrtc_compile(head, r0.program_path, opts, plan.heap))
    pch.finish(plan, os.path.isfile(plan.tmp) and needed is None, needed)
    size = os.path.getsize(plan.path) if os.path.isfile(plan.path) else None
    out["pch_create"] = {"cpu_s": cpu, "wall_s": wall, "bytes": size}
    rows = []
    for r in reqs:
        moved = tuple(d for d in r.defines if d[0] not in r.fixed_defines)
        p = pch.plan(r.source, moved, r.header_texts, r.arch, nvrtc._pch_options(r), store)
        if p is None or p.create:
            continue
        ok, ph = raw_compile(p.source, r, [f"--use-pch={p.path}".encode()], defines=False)
        if ok:
            rows.append(ph)
    out["pch"] = {k: mean([p.get(k, 0.0) for p in rows]) for k in (rows[0] if rows else {})}
    return out


def per_config(reqs: list, cache_root: Path, store: str | None) -> dict[str, Any]:
    """ktt's path, one compile at a time, on a cold cache: mean CPU and wall seconds per configuration."""
    cache = tempfile.mkdtemp(dir=cache_root)
    cpu, wall, pch_states = [], [], []
    for r in reqs:
        (out, _), c, w = timed(lambda r=r: compile_cached(r, cache, pch_dir=store))
        if out.pch == "created":
            pch_states.append(("created", c, w))
            continue
        cpu.append(c)
        wall.append(w)
        pch_states.append((out.pch, c, w))
    created = [s for s in pch_states if s[0] == "created"]
    return {
        "cpu_s": mean(cpu),
        "wall_s": mean(wall),
        "n": len(cpu),
        "used_pch": sum(1 for s in pch_states if s[0] == "used"),
        "creation_cpu_s": created[0][1] if created else None,
    }


def raw_per_config(reqs: list) -> dict[str, Any]:
    cpu, wall = [], []
    for r in reqs:
        opts = nvrtc.option_bytes(r)
        _, c, w = timed(lambda r=r, opts=opts: nvrtc._nvrtc_compile(r.source, r.program_path, opts, pch.HEAP_BYTES))
        cpu.append(c)
        wall.append(w)
    return {"cpu_s": mean(cpu), "wall_s": mean(wall), "n": len(cpu)}


def pool_run(reqs: list, cache_root: Path, workers: int, use_pch: bool) -> dict[str, Any]:
    cache = tempfile.mkdtemp(dir=cache_root)
    t0 = time.perf_counter()
    pool = CompilePool(workers, cache, pch=use_pch)
    try:
        for f in pool.warm(ARCH):
            f.result()
        warm_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        futures = [pool.submit(r) for r in reqs]
        outs = [f.result()[0] for f in futures]
        wall = time.perf_counter() - t1
        stats = dict(pool.stats.__dict__)
    finally:
        pool.shutdown()
    return {
        "workers": workers,
        "configs": len(reqs),
        "ok": sum(o.ok for o in outs),
        "wall_s": wall,
        "configs_per_s": len(reqs) / wall if wall else None,
        "start_s": warm_s,
        "stats": stats,
    }


def fmt(v: Any, spec: str = ".3f") -> str:
    return "-" if v is None else format(v, spec)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", default="gemm,cub")
    ap.add_argument("--configs", type=int, default=24, help="sampled configurations per example")
    ap.add_argument("--phase-configs", type=int, default=6, help="configurations for the phase split")
    ap.add_argument("--workers", type=int, default=default_workers())
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp")) / "compile_throughput")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "nvrtc": None, "workers": args.workers,
                              "cpus": os.cpu_count()}  # fmt: skip
    from ktt.toolkit import nvrtc_version

    report["nvrtc"] = nvrtc_version()
    nvrtc.warm_up(ARCH)
    with contextlib.suppress(Exception):
        from cuda.bindings import nvrtc as api

        api.nvrtcSetPCHHeapSize(pch.HEAP_BYTES)
    root = Path(tempfile.mkdtemp(prefix="ktt-compile-bench-"))
    try:
        for name in [e.strip() for e in args.examples.split(",") if e.strip()]:
            work = root / name / "work"
            reqs, distinct, total = requests(name, work, args.configs, args.seed)
            store = tempfile.mkdtemp(dir=root)
            store2 = tempfile.mkdtemp(dir=root)
            print(f"[{name}] {len(reqs)} of {total} configurations; phase split ...", file=sys.stderr, flush=True)
            ex: dict[str, Any] = {"space": total, "distinct_programs": distinct, "sample": len(reqs)}
            ex["phases_ms"] = phase_split(reqs[: args.phase_configs], store)
            print(f"[{name}] one at a time ...", file=sys.stderr, flush=True)
            ex["raw_nvrtc"] = raw_per_config(reqs[: args.phase_configs])
            ex["ktt_before"] = per_config(reqs[: args.phase_configs], root, None)
            ex["ktt_pch"] = per_config(reqs[: args.phase_configs], root, store2)
            print(f"[{name}] pool of {args.workers} ...", file=sys.stderr, flush=True)
            ex["pool_no_pch"] = pool_run(reqs, root, args.workers, False)
            ex["pool_pch"] = pool_run(reqs, root, args.workers, True)
            report[name] = ex
            print_table(name, ex)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    (args.out / "compile_throughput.json").write_text(json.dumps(report, indent=2))
    print(f"\nwrote {args.out / 'compile_throughput.json'}")
    return 0


def print_table(name: str, ex: dict[str, Any]) -> None:
    ph = ex["phases_ms"]
    print(f"\n== {name}: {ex['space']} configurations, {ex['distinct_programs']} distinct programs "
          f"({ex['space'] - ex['distinct_programs']} compile the same program as another) ==")  # fmt: skip
    print(f"{'NVRTC phase (ms per configuration)':40s} {'ordinary':>10s} {'with PCH':>10s}")
    keys = list(dict.fromkeys([*(ph["ordinary"] or {}), *(ph.get("pch") or {})]))
    for k in keys:
        print(f"{k:40s} {fmt(ph['ordinary'].get(k), '.0f'):>10s} {fmt((ph.get('pch') or {}).get(k), '.0f'):>10s}")
    if ph.get("pch_create"):
        c = ph["pch_create"]
        print(f"{'precompiled header, made once':40s} {fmt(c['cpu_s'], '.2f')} s CPU, {c['bytes'] or 0:,} bytes")
    print(f"\n{'one compile at a time':40s} {'CPU s':>8s} {'wall s':>8s}")
    for label, key in (("raw NVRTC call", "raw_nvrtc"), ("ktt path, before (no PCH)", "ktt_before"),
                       ("ktt path, with PCH", "ktt_pch")):  # fmt: skip
        r = ex[key]
        print(f"{label:40s} {fmt(r['cpu_s']):>8s} {fmt(r['wall_s']):>8s}")
    b, p = ex["ktt_before"]["cpu_s"], ex["ktt_pch"]["cpu_s"]
    if not ex["ktt_pch"]["used_pch"]:
        print("(no precompiled header: the kernel does not start with <...> includes; the two rows are the same path)")
    elif b and p:
        print(f"{'per-configuration speed-up (CPU)':40s} {b / p:>8.2f}x   (target for cub: >= 2x)")
    print(f"\n{'compile pool, cold cache':40s} {'conf/s':>8s} {'wall s':>8s}  counts")
    for label, key in (("no PCH", "pool_no_pch"), ("with PCH", "pool_pch")):
        r = ex[key]
        s = r["stats"]
        print(f"{label + ' (' + str(r['workers']) + ' workers)':40s} {fmt(r['configs_per_s'], '.2f'):>8s} "
              f"{fmt(r['wall_s'], '.2f'):>8s}  compiled {s['compiled']}, PCH used {s['pch_used']} "
              f"made {s['pch_created']}, duplicates {s['deduplicated']}, ok {r['ok']}/{r['configs']}")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
