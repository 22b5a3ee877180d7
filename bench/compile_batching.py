"""Would compiling several configurations as one NVRTC program be faster? (no GPU needed)

    python bench/compile_batching.py [--example gemm] [--batches 1,4,8,16,32] [--configs 32] [--out DIR]

ktt compiles one program per configuration (ktt.compile_pool). Part of each compile is
the same for every configuration: NVRTC's start, its built-in headers, the front end's
fixed work, the module's set-up in NVVM and ptxas. This measures how much of it one
program holding B configurations would save: each configuration's source is repeated in
the program under its own ``#define`` block with its kernel renamed (``sgemm`` ->
``sgemm__c3``), so the module holds B kernels. This path is NOT used by ktt; the numbers
decide whether it is worth building.

A source with its own namespace-scope definitions (a ``constexpr`` or ``__device__`` variable,
a helper function) cannot be repeated this way (redefinition: the bench/cub_reduce kernel); such
rows count the configurations whose batch failed, and their time is not comparable.

For each batch size B, on the same seeded sample of the example's valid configurations,
one process, one compile at a time: CPU seconds per configuration (robust to a loaded
machine), NVRTC's own phase split (``--time``) per configuration, and whether each
kernel's PTX in the batched module is the PTX of its own compile (its name and the module-wide
numbering of branch labels aside):
if it is not, batching changes the code that would be timed.

Prints a table and writes OUT/compile_batching.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from compile_throughput import EXAMPLES, read_phases, requests  # noqa: E402

from ktt import nvrtc  # noqa: E402
from ktt.csource import global_function_lines  # noqa: E402


def _compile(source: str, name: str, options: list[bytes], timing: str | None) -> tuple[str | None, str]:
    """One NVRTC compile to PTX and SASS for the exact arch: (ptx or None, log)."""
    from cuda.bindings import nvrtc as api

    opts = list(options) + ([f"--time={timing}".encode()] if timing else [])
    err, prog = api.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    if err != api.nvrtcResult.NVRTC_SUCCESS:
        return None, str(err)
    try:
        (result,) = api.nvrtcCompileProgram(prog, len(opts), opts)
        _, size = api.nvrtcGetProgramLogSize(prog)
        log = b" " * size
        api.nvrtcGetProgramLog(prog, log)
        if result != api.nvrtcResult.NVRTC_SUCCESS:
            return None, log.decode(errors="replace")
        _, size = api.nvrtcGetCUBINSize(prog)
        cubin = b" " * size
        api.nvrtcGetCUBIN(prog, cubin)  # the SASS is made (and paid for) as in ktt's compiles
        _, size = api.nvrtcGetPTXSize(prog)
        ptx = b" " * size
        api.nvrtcGetPTX(prog, ptx)
        return ptx.decode(errors="replace").rstrip("\x00"), ""
    finally:
        api.nvrtcDestroyProgram(prog)


_ENTRY = re.compile(r"\.entry\s+(\w+)\(")


def ptx_entries(ptx: str) -> dict[str, str]:
    """Each kernel's PTX text, from its .entry line to the next entry (or the end)."""
    marks = [(m.start(), m.group(1)) for m in _ENTRY.finditer(ptx)]
    # a kernel's text starts at the .visible/.weak line that carries its .entry
    starts = [(ptx.rfind("\n", 0, pos) + 1, name) for pos, name in marks]
    out = {}
    for i, (start, name) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else len(ptx)
        out[name] = ptx[start:end].strip()
    return out


_LABEL = re.compile(r"\$L__BB\d+_")


def normalised(text: str, renamed: str, name: str) -> str:
    """A kernel's PTX with its batch name put back (mangled forms too) and block labels unnumbered
    (labels carry the function's index in the module)."""
    text = text.replace(f"{len(renamed)}{renamed}", f"{len(name)}{name}").replace(renamed, name)
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("// .globl")]  # the next kernel's
    return _LABEL.sub("$L__BB_", "\n".join(lines).strip())


def batched_source(reqs: list, kernels: list[str]) -> str:
    """B configurations in one program: each copy under its own defines, kernels renamed."""
    parts = []
    for i, r in enumerate(reqs):
        moved = [(k, v) for k, v in r.defines if k not in r.fixed_defines]
        block = "".join(f"#define {k} {v}\n" for k, v in moved)
        block += "".join(f"#define {k} {k}__c{i}\n" for k in kernels)
        block += f'#line 1 "{r.display_name}"\n{r.source}\n'
        block += "".join(f"#undef {k}\n" for k in kernels)
        block += "".join(f"#undef {k}\n" for k, _ in moved)
        parts.append(block)
    return "\n".join(parts)


def measure(reqs: list, batch: int, work: str) -> dict[str, Any]:
    kernels = sorted(global_function_lines(reqs[0].source))
    cpu = 0.0
    phases: dict[str, float] = {}
    same = compared = failed = 0
    singles: dict[int, dict[str, str]] = {}
    if batch > 1:  # each configuration's own PTX, to compare against (not timed)
        for i, r in enumerate(reqs):
            ptx, _ = _compile(r.source, r.program_path, nvrtc.option_bytes(r), None)
            singles[i] = {k: normalised(v, k, k) for k, v in ptx_entries(ptx).items()} if ptx else {}
    for lo in range(0, len(reqs), batch):
        group = reqs[lo : lo + batch]
        timing = os.path.join(work, f"time_{batch}_{lo}.csv")
        if batch == 1:
            source, options = group[0].source, nvrtc.option_bytes(group[0])
        else:
            source, options = batched_source(group, kernels), nvrtc._pch_options(group[0])
        c0 = time.process_time()
        ptx, log = _compile(source, group[0].program_path, options, timing)
        cpu += time.process_time() - c0
        for k, v in read_phases(timing).items():
            phases[k] = phases.get(k, 0.0) + v
        if ptx is None:
            failed += len(group)
            print(f"  batch {batch} at {lo}: compile failed: {log[:300]}", file=sys.stderr)
            continue
        if batch > 1:
            entries = ptx_entries(ptx)
            for j in range(len(group)):
                for k in kernels:
                    mine = normalised(entries.get(f"{k}__c{j}", ""), f"{k}__c{j}", k)
                    compared += 1
                    same += mine == singles[lo + j].get(k)
    n = len(reqs)
    return {
        "batch": batch,
        "configs": n,
        "failed": failed,
        "cpu_s_per_config": cpu / n,
        "phases_ms_per_config": {k: v / n for k, v in phases.items()},
        "ptx_identical": same,
        "ptx_compared": compared,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--example", default="gemm", choices=sorted(EXAMPLES))
    ap.add_argument("--batches", default="1,4,8,16,32")
    ap.add_argument("--configs", type=int, default=32, help="sampled configurations (a multiple of each batch)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp")) / "compile_batching")
    args = ap.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    with tempfile.TemporaryDirectory() as work:
        reqs, _, size = requests(args.example, Path(work) / "wd", args.configs, args.seed)
        _compile(reqs[0].source, reqs[0].program_path, nvrtc.option_bytes(reqs[0]), None)  # NVRTC loaded
        rows = [measure(reqs, b, work) for b in batches]
    base = rows[0]["cpu_s_per_config"] if batches[0] == 1 else None
    print(f"{args.example}: {len(reqs)} configurations sampled from {size} (seed {args.seed}), one compile at a time")
    names = sorted({k for r in rows for k in r["phases_ms_per_config"]})
    head = ["batch", "failed", "CPU s/config", "vs 1"] + [f"{n} ms" for n in names] + ["PTX identical"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        ratio = f"{base / r['cpu_s_per_config']:.2f}x" if base and not r["failed"] else "-"
        cells = [str(r["batch"]), str(r["failed"]), f"{r['cpu_s_per_config']:.3f}", ratio]
        cells += [f"{r['phases_ms_per_config'].get(n, 0.0):.1f}" for n in names]
        cells.append(f"{r['ptx_identical']}/{r['ptx_compared']}" if r["batch"] > 1 else "-")
        print("| " + " | ".join(cells) + " |")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "compile_batching.json").write_text(json.dumps({"example": args.example, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
