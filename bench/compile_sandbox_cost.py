"""What the compile containment costs per compile, on the shared GEMM kernel (bench/gemm_space/).

    python bench/compile_sandbox_cost.py [N]

Compiles N configurations of the GEMM space (default 240) two ways, alternating so that
machine noise hits both alike: ``ktt.nvrtc.compile_cubin`` as a run uses it (option
whitelist, include scan, a Landlock-confined compile thread, scrubbed and capped log), and
NVRTC called directly with the same options. Prints one JSON line: the medians and the
difference per compile, plus the cost of the pieces measured alone.
"""

from __future__ import annotations

import io
import itertools
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from cuda.core import Program

from ktt import includes, sandbox
from ktt.nvrtc import CompileRequest, _program_options, _view, compile_cubin, precheck
from ktt.redact import redact
from ktt.toolkit import cuda_include_dirs

SPACE = Path(__file__).resolve().parent / "gemm_space"


def configs(n: int) -> list[dict[str, int]]:
    space = json.loads((SPACE / "space.json").read_text())
    params = space["tune_params"]
    names = list(params)
    valid = []
    for values in itertools.product(*params.values()):
        c = dict(zip(names, values, strict=True))
        bx, by, tx, ty, tk, pad = (c[k] for k in names)
        if 64 <= bx * by <= 1024 and tx * ty <= 64 and 4 * tk * (by * ty + pad + bx * tx + pad) <= 49152:
            valid.append(c)
    random.Random(0).shuffle(valid)
    return valid[:n]


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 240
    source = (SPACE / "sgemm.cu").read_text()
    work = Path(tempfile.mkdtemp(prefix="ktt-bench-"))
    (work / "inputs.hpp").write_text("#pragma once\n")

    def request(c: dict[str, int]) -> CompileRequest:
        return CompileRequest(
            source, str(work / "kernels.cu"), "kernels.cu", "sm_90",
            tuple(sorted((k, str(v)) for k, v in c.items())), (str(work), *cuda_include_dirs()),
            ("-lineinfo",),
        )  # fmt: skip

    def raw(req: CompileRequest) -> None:
        Program(req.source, "c++", _program_options(req)).compile("cubin", logs=io.StringIO())

    compile_cubin(request(configs(1)[0]))  # warm-up: libraries loaded, scan and view memoised
    contained, direct = [], []
    for c in configs(n):
        req = request(c)
        for kind in ("contained", "direct") if len(contained) % 2 == 0 else ("direct", "contained"):
            t = time.perf_counter()
            if kind == "contained":
                assert compile_cubin(req).ok
                contained.append(time.perf_counter() - t)
            else:
                raw(req)
                direct.append(time.perf_counter() - t)

    req = request(configs(1)[0])
    reps = 200
    t = time.perf_counter()
    for _ in range(reps):
        precheck(req)
    precheck_us = (time.perf_counter() - t) / reps * 1e6
    includes._memo.clear()
    t = time.perf_counter()
    includes.check_includes(source, "kernels.cu", str(work), _view(req))
    first_scan_us = (time.perf_counter() - t) * 1e6
    view = _view(req).sandbox_view()
    t = time.perf_counter()
    for _ in range(reps):
        sandbox.run_restricted(lambda: None, view)
    thread_us = (time.perf_counter() - t) / reps * 1e6
    log = "kernels.cu(3): warning: something\n" * 200
    t = time.perf_counter()
    for _ in range(reps):
        redact(log)
    redact_us = (time.perf_counter() - t) / reps * 1e6

    med_c, med_d = statistics.median(contained), statistics.median(direct)
    print(
        json.dumps(
            {
                "compiles": n,
                "landlock_abi": sandbox.landlock_abi(),
                "median_contained_ms": round(med_c * 1e3, 2),
                "median_direct_ms": round(med_d * 1e3, 2),
                "difference_ms": round((med_c - med_d) * 1e3, 2),
                "difference_pct": round((med_c - med_d) / med_d * 100, 2),
                "mean_contained_ms": round(statistics.fmean(contained) * 1e3, 2),
                "mean_direct_ms": round(statistics.fmean(direct) * 1e3, 2),
                "pieces_us": {
                    "precheck_memoised": round(precheck_us, 1),
                    "include_scan_first": round(first_scan_us, 1),
                    "landlock_thread": round(thread_us, 1),
                    "redact_8kb_log": round(redact_us, 1),
                },
            }
        )
    )


if __name__ == "__main__":
    main()
