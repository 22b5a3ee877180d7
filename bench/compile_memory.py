"""How much memory and address space one NVRTC compile takes in a compile-pool worker (no GPU needed).

    python bench/compile_memory.py [--configs 6] [--examples gemm,cub]

The compile pool's workers (ktt.compile_pool) run under an address-space limit
(``RLIMIT_AS``, ktt.compile_limits). This measures what a normal compile needs, to choose
that limit with margin: for each example (bench/gemm_space, the shared GEMM; bench/cub_reduce,
a kernel that includes <cub/block/block_reduce.cuh>), a pool of one worker compiles a seeded
sample of configurations the way ``ktt tune`` does (forkserver, NVRTC's PCH heap reserved,
precompiled headers on, Landlock), under the default limit, and each compile reports the
worker's peak virtual size (VmPeak) and peak resident set (VmHWM) from /proc/self/status.
Prints one table.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from compile_throughput import requests  # noqa: E402  (bench/: the same seeded configurations)

from ktt.compile_pool import CompilePool, _compile_job  # noqa: E402

ARCHES = ("sm_90", "sm_90a")


def vm_status() -> dict[str, int]:
    """VmPeak and VmHWM of this process, in MiB."""
    out = {}
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmPeak", "VmHWM"):
                out[key] = int(value.split()[0]) // 1024
    return out


def measured_job(req: Any, cache_dir: str | None, pch_dir: str | None) -> tuple[Any, str]:
    """The pool's compile job, plus the worker's peaks after it (in the result's key slot)."""
    out, _ = _compile_job(req, cache_dir, pch_dir)
    peaks = vm_status()
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return out, f"{peaks['VmPeak']} {peaks['VmHWM']} {soft}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", type=int, default=6)
    parser.add_argument("--examples", default="gemm,cub")
    args = parser.parse_args()
    rows = []
    for name in args.examples.split(","):
        for arch in ARCHES:
            with tempfile.TemporaryDirectory(prefix="ktt-mem-") as tmp:
                reqs, _, _ = requests(name, Path(tmp) / "work", args.configs, 0, arch)
                pool = CompilePool(1, str(Path(tmp) / "cache"), job=measured_job)
                try:
                    results = [pool.submit(r).result() for r in reqs]
                finally:
                    pool.shutdown()
            ok = sum(out.ok for out, _ in results)
            peaks = [tuple(int(x) for x in key.split()) for _, key in results]
            rows.append((name, arch, len(reqs), ok, max(p[0] for p in peaks), max(p[1] for p in peaks), peaks[0][2]))
    print(f"{'example':8} {'arch':7} {'configs':>7} {'ok':>3} {'VmPeak MiB':>10} {'VmHWM MiB':>9}  RLIMIT_AS")
    for name, arch, n, ok, vm, rss, soft in rows:
        limit = "unlimited" if soft == resource.RLIM_INFINITY else f"{soft // 2**20} MiB"
        print(f"{name:8} {arch:7} {n:>7} {ok:>3} {vm:>10} {rss:>9}  {limit}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
