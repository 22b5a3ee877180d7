"""The table of bench/kernelbench/run-gpu.sh, from what it left in DEST (one row per problem).

    python3 bench/kernelbench/table.py DEST KERNELS_DIR

Per problem: whether `cacao --check` passed, the tuned best (ktt's summary.json: the median of the
timed repetitions, L2 flushed between them), whether it passed every input set (five: the
problem's validation.input_sets), the torch eager reference as ktt measured it (CUDA events, the
minimum of 5 calls after 5 warm-ups) and as KernelBench's harness would (eager_time.py: cold L2,
the mean of 100 calls), and the speedup over each. Writes DEST/table.md and prints it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def read_json(path: Path) -> dict | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    try:
        return json.loads(text)
    except ValueError:
        return None


def ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def main() -> int:
    dest, kernels = Path(sys.argv[1]), Path(sys.argv[2])
    head = ("problem", "--check", "kernel ms", "input sets passed", "eager ms (ktt)", "speedup (ktt)",
            "eager ms (KernelBench-style)", "speedup (KernelBench-style)", "config")  # fmt: skip
    rows = [head]
    ok_all = True
    for kdir in sorted(p for p in kernels.iterdir() if p.is_dir()):
        name = kdir.name
        check = (dest / f"{name}.check.rc").read_text().strip() if (dest / f"{name}.check.rc").exists() else "?"
        summary = read_json(dest / f"{name}.summary.json") or {}
        eager = read_json(dest / f"{name}.eager.json") or {}
        best = summary.get("best") or {}
        t = best.get("time_ms")
        sets = summary.get("_input_sets", "?")
        confirmed = bool(summary.get("confirmed_on_fresh_input"))
        ref = summary.get("reference_ms")
        kb = eager.get("mean_ms")
        good = check == "0" and t is not None and confirmed
        ok_all &= good
        rows.append((
            name, "ok" if check == "0" else f"exit {check}", ms(t),
            f"{sets} of {sets}" if confirmed else f"no ({summary.get('message') or 'no valid kernel'})"[:80],
            ms(ref), f"{summary['speedup']:.2f}x" if summary.get("speedup") else "-",
            ms(kb), f"{kb / t:.2f}x" if (kb and t) else "-", json.dumps(best.get("config", {})),
        ))  # fmt: skip
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(head))]
    text = "\n".join("| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in rows)
    text = text.replace("\n", "\n|" + "|".join("-" * (w + 2) for w in widths) + "|\n", 1)
    verdict = "PASS: every problem imported, checked, valid on every input set" if ok_all else "FAIL: see above"
    (dest / "table.md").write_text(text + "\n\n" + verdict + "\n")
    print(text)
    print(verdict)
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
