#!/usr/bin/env bash
# The compatibility proof on a GPU: the original CACAO's own problem directories, each tuned
# with a known-good kernel of ours, reported as one table.
#
#   scripts/compat-gpu.sh PROBLEMS_DIR [KERNELS_DIR] [OUT_DIR]
#
# PROBLEMS_DIR holds problem directories in the original's format (e.g. a checkout's problems/);
# KERNELS_DIR (default bench/compat_kernels) holds <problem>/kernels.cu and tuning.yaml for the
# problems to run; OUT_DIR (default $OUT, else ./compat-out) receives each run's summary.json,
# the ktt output and compat_table.md. Each problem is copied first, so the originals stay as they
# are (tuning fills null reference times into output/reference_time.json of the copy).
# DURATION (default 10) is every case's budget in seconds (ktt tune --duration).
#
# Per problem: `cacao --check`, then `python -m ktt tune`; the table has the reference type, the
# check's verdict, whether the reference was built and run, the tuned best, the speedup (the
# geometric mean over cases where there are several) and each denominator with its source.
set -uo pipefail
cd "$(dirname "$0")/.."
PROBLEMS=${1:?usage: scripts/compat-gpu.sh PROBLEMS_DIR [KERNELS_DIR] [OUT_DIR]}
KERNELS=${2:-bench/compat_kernels}
DEST=${3:-${OUT:-compat-out}}
DURATION=${DURATION:-10}
PY=${PYTHON:-python3}
mkdir -p "$DEST"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

for kdir in "$KERNELS"/*/; do
    name=$(basename "$kdir")
    if [ ! -d "$PROBLEMS/$name" ]; then
        echo "skip $name: no $PROBLEMS/$name" >&2
        continue
    fi
    cp -r "$PROBLEMS/$name" "$WORK/$name"
    echo "== $name" >&2
    $PY -m cacao_tui --dir "$WORK/$name" --check >"$DEST/$name.check.txt" 2>&1
    echo $? >"$DEST/$name.check.rc"
    $PY -m ktt tune --problem "$WORK/$name" --kernel "$kdir/kernels.cu" --spec "$kdir/tuning.yaml" \
        --output "$WORK/$name-out" --duration "$DURATION" --json >"$DEST/$name.tune.jsonl" 2>"$DEST/$name.tune.err"
    echo $? >"$DEST/$name.tune.rc"
    [ -f "$WORK/$name-out/summary.json" ] && cp "$WORK/$name-out/summary.json" "$DEST/$name.summary.json"
    [ -f "$WORK/$name/output/reference_time.json" ] && cp "$WORK/$name/output/reference_time.json" "$DEST/$name.reference_time.json"
done

$PY - "$DEST" "$KERNELS" "$PROBLEMS" <<'EOF'
"""Print and write the compatibility table from the files the loop above left in DEST."""

import json
import sys
from pathlib import Path

dest, kernels, problems = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])


def ms(value):
    return "-" if value is None else f"{value:.4g} ms"


rows = [("problem", "reference", "--check", "reference built", "tuned best", "speedup", "denominator (source)")]
for kdir in sorted(p for p in kernels.iterdir() if p.is_dir()):
    name = kdir.name
    if not (problems / name).is_dir():
        continue
    check_rc = (dest / f"{name}.check.rc").read_text().strip()
    tune_rc = (dest / f"{name}.tune.rc").read_text().strip()
    lines = [json.loads(x) for x in (dest / f"{name}.tune.jsonl").read_text().splitlines() if x.startswith("{")]
    result = next((x for x in reversed(lines) if x.get("type") == "result"), None)
    error = next((x for x in reversed(lines) if x.get("type") == "error"), None)
    kind = "?"
    try:
        import yaml

        kind = (yaml.safe_load((problems / name / "problem.yaml").read_text()).get("reference") or {}).get("type", "cuda")
    except Exception:  # noqa: BLE001 - only a label
        pass
    check = "ok" if check_rc == "0" else f"exit {check_rc}"
    if result is None:
        why = error["message"].splitlines()[0][:80] if error else f"exit {tune_rc}"
        rows.append((name, kind, check, "no" if "reference" in why else "?", f"failed: {why}", "-", "-"))
        continue
    cases = result.get("cases") or []
    built = "yes" if all(c.get("status") != "build_failed" for c in cases) else "yes (kernel build failed)"
    best = result.get("best")
    tuned = f"{ms(best['time_ms'])} {json.dumps(best['config'])}" if best else (result.get("message") or "none")
    speed = result.get("score") if len(cases) > 1 else result.get("speedup")
    speed_text = "-" if speed is None else f"{speed:.3g}x" + (" (geomean)" if len(cases) > 1 else "")
    denominators = "; ".join(
        f"{c['name']}: {ms(c.get('reference_ms'))} ({c.get('reference_source') or '-'}"
        + (f", {c['reference_method']}" if c.get("reference_method") and c.get("reference_source") == "measured" else "")
        + ")"
        for c in cases
    )
    rows.append((name, kind, check, built, tuned, speed_text, denominators))
    for w in result.get("warnings") or []:
        print(f"warning [{name}]: {w}", file=sys.stderr)

table = ["| " + " | ".join(r) + " |" for r in rows]
table.insert(1, "|" + "---|" * len(rows[0]))
text = "\n".join(table)
print(text)
(dest / "compat_table.md").write_text(text + "\n")
EOF
