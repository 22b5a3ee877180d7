#!/usr/bin/env bash
# Suites on a 2-GPU machine (docs/CLUSTER.md, "On the lab's 2-GPU machines"): run from the repository root.
#
#   scripts/suite-gpu.sh [bench|suite|both]      (default: bench)
#
# bench  bench/suite_two_gpus.py: the four shipped problems' example kernels tuned by ktt tune,
#        placed by the suite's slot pool on 1 GPU, then on 2; prints the throughput table
#        (target >= 1.8x). About 3 minutes.
# suite  cacao suite without --cluster on two copies of problems/mmul (its recorded session,
#        --provider replay, real tuning and profiling, --max-iter 1 --timeout 2): each run on its
#        own GPU, the placement lines and the collected table. About 2 minutes.
# Wheels carried in .whl/ go to /tmp/site (as scripts/gpu-check.sh does); results under $OUT.
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

if [ "$WHAT" = bench ] || [ "$WHAT" = both ]; then
  "$PY" bench/suite_two_gpus.py --out "$OUT" || status=1
fi

if [ "$WHAT" = suite ] || [ "$WHAT" = both ]; then
  work=/tmp/cacao-suite-gpu
  rm -rf "$work" && mkdir -p "$work"
  for n in mmul_a mmul_b; do
    cp -r problems/mmul "$work/$n" && rm -rf "$work/$n/output" "$work/$n/archive"
  done
  "$PY" -m cacao_tui suite "$work/mmul_a" "$work/mmul_b" --provider replay --max-iter 1 --timeout 2 \
    --output "$OUT/suite" 2>&1 | tee "$OUT/suite.txt" || status=1
  echo "placements (job_placed events of each run):" | tee -a "$OUT/suite.txt"
  for n in mmul_a mmul_b; do
    "$PY" - "$work/$n/output/run.jsonl" "$n" <<'PYEOF' | tee -a "$OUT/suite.txt"
import json, sys
for line in open(sys.argv[1], encoding="utf-8"):
    e = json.loads(line)
    if e.get("type") == "job_placed":
        print(f"  {sys.argv[2]}: {e.get('branch')} #{e.get('iteration')}: {e['message']}")
PYEOF
  done
fi
exit $status
