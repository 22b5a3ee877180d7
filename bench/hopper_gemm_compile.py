"""Compile every configuration of a gemm_bf16 tuning space for sm_90a, without a GPU, and print
what ptxas says: registers, spills, stack, and its performance warnings (e.g. C7518, wgmma
serialised) per configuration, with a summary table.

    python bench/hopper_gemm_compile.py [--kernel K.cu --spec S.yaml] [--shape n8192] [--jobs 1]

Default: the example kernel (problems/gemm_bf16/example). The restrictions are those of
tuning.yaml at the chosen shape; compiles go through ktt's own NVRTC path (ktt.nvrtc, the
sandbox and the include checks), with `-Xptxas=-v` added. A configuration is "clean" when it
compiles with no spill, no stack frame and no ptxas performance warning.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ktt.expressions import Expression  # noqa: E402
from ktt.nvrtc import CompileRequest, compile_cubin, define_pairs  # noqa: E402
from ktt.problem import load_problem  # noqa: E402
from ktt.problem.inputs_hpp import render_inputs_hpp  # noqa: E402
from ktt.space import SearchSpace  # noqa: E402
from ktt.toolkit import cuda_include_dirs  # noqa: E402

PROBLEM = ROOT / "problems" / "gemm_bf16"
USED = re.compile(r"Used (\d+) registers")
SPILLS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
WARNING = re.compile(r"\((C\d{4})\) (.*)")


def _compile(job: tuple[str, str, str, tuple[tuple[str, str], ...]]) -> dict:
    source, work, header, defines = job
    req = CompileRequest(
        source=source,
        program_path=str(Path(work) / "kernels.cu"),
        display_name="kernels.cu",
        arch="sm_90a",
        defines=defines,
        include_dirs=(work, *cuda_include_dirs()),
        options=("-Xptxas=-v",),
        header_texts=(("inputs.hpp", header),),
    )
    out = compile_cubin(req)
    log = out.log
    used = USED.search(log)
    spill = SPILLS.search(log)
    return {
        "ok": out.ok and out.cubin is not None,
        "registers": int(used.group(1)) if used else None,
        "stack": int(spill.group(1)) if spill else None,
        "spills": (int(spill.group(2)) + int(spill.group(3))) if spill else None,
        "warnings": sorted({m.group(1) for m in WARNING.finditer(log)}),
        "seconds": out.seconds,
        "error": "" if out.ok else (out.diagnostics[0].message if out.diagnostics else log[-300:]),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", type=Path, default=PROBLEM / "example" / "kernels.cu")
    ap.add_argument("--spec", type=Path, default=PROBLEM / "example" / "tuning.yaml")
    ap.add_argument("--shape", default="n8192")
    ap.add_argument("--jobs", type=int, default=1)
    args = ap.parse_args(argv)

    problem = load_problem(PROBLEM)
    shape = problem.shape(args.shape)
    spec = yaml.safe_load(args.spec.read_text())
    space = SearchSpace(spec["tune_params"], [Expression(r) for r in spec.get("restrictions", [])],
                        constants=dict(shape.scalars))  # fmt: skip
    keys = list(space.iter_valid())
    source = args.kernel.read_text()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="hopper-gemm-compile-") as work:
        header = render_inputs_hpp(problem, shape)
        (Path(work) / "inputs.hpp").write_text(header)
        jobs = [(source, work, header, define_pairs(problem.defines(shape), space.config(k))) for k in keys]
        with ProcessPoolExecutor(args.jobs) as pool:
            results = list(pool.map(_compile, jobs))
    wall = time.perf_counter() - start

    print(f"{args.kernel.relative_to(ROOT)} with {args.spec.relative_to(ROOT)}, shape {shape.name}, sm_90a")
    print("| config | ok | registers | spills (bytes) | stack | ptxas warnings | compile s |")
    print("|---|---|---|---|---|---|---|")
    for key, r in zip(keys, results, strict=True):
        cfg = " ".join(f"{n}={v}" for n, v in space.config(key).items())
        print(f"| {cfg} | {'yes' if r['ok'] else 'NO: ' + r['error'][:80]} | {r['registers']} | {r['spills']} | "
              f"{r['stack']} | {', '.join(r['warnings']) or '-'} | {r['seconds']:.1f} |")  # fmt: skip
    ok = [r for r in results if r["ok"]]
    clean = [r for r in ok if not r["spills"] and not r["stack"] and not r["warnings"]]
    regs = [r["registers"] for r in ok if r["registers"] is not None]
    print()
    print("| configurations | compiled | clean | with spills | with ptxas warnings | registers (min-max) | wall s |")
    print("|---|---|---|---|---|---|---|")
    spilled = sum(1 for r in ok if r["spills"])
    warned = sum(1 for r in ok if r["warnings"])
    regs_range = f"{min(regs, default=0)}-{max(regs, default=0)}"
    print(f"| {len(keys)} | {len(ok)} | {len(clean)} | {spilled} | {warned} | {regs_range} | {wall:.0f} |")
    return 0 if len(ok) == len(keys) else 1


if __name__ == "__main__":
    raise SystemExit(main())
