#!/usr/bin/env bash
# Suites on a 2-GPU machine (docs/CLUSTER.md, "On the lab's 2-GPU machines"): run from the repository root.
#
#   scripts/suite-gpu.sh [bench|suite|both]      (default: bench)
#
# bench  bench/suite_two_gpus.py: every shipped problem's example kernel tuned by ktt tune, placed
#        by the suite's slot pool on 1 GPU, then on 2; prints the throughput table (target >= 1.8x).
#        About 4 minutes.
# suite  cacao suite without --cluster over copies of every shipped problem (problems/*), each
#        replaying its recorded session (--provider replay) with real tuning and profiling and a
#        short budget (--timeout 2 s a case): one GPU per run, the next problem on the GPU that
#        comes free first. Prints the placement lines, the collected table and a verdict (every
#        problem finished and validated a kernel). About 4 minutes.
#
# Environment: OUT (results, default /tmp/suite-gpu), PYTHON, SUITE_TIMEOUT (default 2),
# SUITE_ARGS (more flags for cacao suite, e.g. "--max-iter 1"; "--dry-run" checks this script on
# a machine without a GPU). Wheels carried in .whl/ go to /tmp/site (as scripts/gpu-check.sh
# does); the project runs from the checkout with PYTHONPATH=/tmp/site:$PWD, and needs no Ray here.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/suite-gpu}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
WHAT="${1:-bench}"
export PYTHONUNBUFFERED=1 KTT_CACHE_DIR="${KTT_CACHE_DIR:-/tmp/ktt-cache}"
if ls .whl/*.whl >/dev/null 2>&1 && [ ! -e /tmp/site/pydantic ]; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    > "$OUT/pip.log" 2>&1 || echo "wheel install FAILED (see $OUT/pip.log)"
fi
export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
status=0

case "$WHAT" in
  bench|suite|both) ;;
  *) echo "usage: scripts/suite-gpu.sh [bench|suite|both]" >&2; exit 2 ;;
esac

if [ "$WHAT" = bench ] || [ "$WHAT" = both ]; then
  "$PY" bench/suite_two_gpus.py --out "$OUT" || status=1
fi

if [ "$WHAT" = suite ] || [ "$WHAT" = both ]; then
  work=/tmp/cacao-suite-gpu
  rm -rf "$work" && mkdir -p "$work"
  dirs=()
  for p in problems/*/; do
    p="${p%/}"
    [ -f "$p/problem.yaml" ] || continue
    n="$(basename "$p")"
    # a copy without an earlier run's files: the checkout's problems stay as they are
    cp -r "$p" "$work/$n" && rm -rf "$work/$n/output" "$work/$n/archive" "$work/$n/output.lock" "$work/$n/inputs.hpp"
    dirs+=("$work/$n")
  done
  # shellcheck disable=SC2086  # SUITE_ARGS is a list of flags
  "$PY" -m cacao_tui suite "${dirs[@]}" --provider replay --timeout "${SUITE_TIMEOUT:-2}" ${SUITE_ARGS:-} \
    --output "$OUT/suite" 2>&1 | tee "$OUT/suite.txt" || status=1
  "$PY" - "$OUT/suite/summary.csv" "${dirs[@]}" <<'PYEOF' 2>&1 | tee -a "$OUT/suite.txt" || status=1
"""Where each run's GPU jobs ran (its job_placed events), and a verdict on the collected table."""
import csv, json, sys
from pathlib import Path

summary, dirs = Path(sys.argv[1]), [Path(d) for d in sys.argv[2:]]
print("placements (job_placed events of each run):")
for d in dirs:
    log = d / "output" / "run.jsonl"
    for line in log.open(encoding="utf-8") if log.is_file() else []:
        e = json.loads(line)
        if e.get("type") == "job_placed":
            print(f"  {d.name}: {e.get('branch')} #{e.get('iteration')}: {e['message']}")
rows = list(csv.DictReader(summary.open(newline=""))) if summary.is_file() else []
dry = any("dry run" in r["status"] for r in rows)
bad = [r["problem"] for r in rows if not r["status"].startswith("ok") or (not dry and not r["best speedup"])]
missing = sorted({d.name for d in dirs} - {r["problem"] for r in rows})
print(f"verdict: {len(rows)} row(s) for {len(dirs)} problem(s); "
      + ("every run finished" + ("" if dry else " with a validated, timed kernel") if not bad and not missing
         else f"NOT OK: {', '.join(bad + missing)}"))
sys.exit(1 if bad or missing else 0)
PYEOF
fi
exit $status
