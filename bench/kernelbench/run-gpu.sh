#!/usr/bin/env bash
# KernelBench on a GPU: three PyTorch modules of ours in KernelBench's form (modules/), imported by
# `cacao import`, each tuned by ktt with its known-good kernel (kernels/<problem>/) and validated on
# five input sets against the module's forward in torch eager; one table of speedups.
#
#   bench/kernelbench/run-gpu.sh [OUT_DIR]         (from the repository root or anywhere)
#
# Runs with the project not installed: PYTHONPATH=/tmp/site:<repo> and python3 (the wheels in .whl/,
# when there, go to /tmp/site first, as scripts/gpu-check.sh does); torch with CUDA must be there.
# DURATION (default 20) is each problem's tuning budget in seconds. DRY=1 runs everything but the
# GPU: the import, `cacao --check` and `ktt check` (NVRTC compiles of each kernel).
# OUT_DIR (default $OUT, else ./kernelbench-out) receives import.txt, per problem its check, tune log,
# summary.json and eager.json, and table.md; the table is printed last. Exit 0 when every problem
# imported, passed --check and has a best valid on every input set.
set -uo pipefail
cd "$(dirname "$0")/../.."
DEST=${1:-${OUT:-kernelbench-out}}
DURATION=${DURATION:-20}
PY=${PYTHON:-python3}
KB=bench/kernelbench
mkdir -p "$DEST"
if ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    > "$DEST/pip.log" 2>&1 || echo "wheel install FAILED (see $DEST/pip.log)"
fi
export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export KTT_CACHE_DIR="${KTT_CACHE_DIR:-/tmp/ktt-cache}"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

start=$(date +%s)
"$PY" -m cacao_tui import "$KB/modules" --to "$WORK/problems" > "$DEST/import.txt" 2>&1
echo "import: exit $? ($(tail -1 "$DEST/import.txt"))"
for kdir in "$KB"/kernels/*/; do
  name=$(basename "$kdir")
  problem="$WORK/problems/$name"
  echo "== $name"
  "$PY" -m cacao_tui --dir "$problem" --check > "$DEST/$name.check.txt" 2>&1
  echo $? > "$DEST/$name.check.rc"
  if [ "${DRY:-0}" = 1 ]; then
    "$PY" -m ktt check --problem "$problem" --kernel "$kdir/kernels.cu" --spec "$kdir/tuning.yaml" --sample 2 \
      > "$DEST/$name.ktt-check.txt" 2>&1
    echo "   check $(cat "$DEST/$name.check.rc"), ktt check exit $?: $(head -1 "$DEST/$name.ktt-check.txt")"
    continue
  fi
  "$PY" -m ktt tune --problem "$problem" --kernel "$kdir/kernels.cu" --spec "$kdir/tuning.yaml" \
    --output "$WORK/$name-out" --duration "$DURATION" --json > "$DEST/$name.tune.jsonl" 2> "$DEST/$name.tune.err"
  echo "   tune exit $?"
  if [ -f "$WORK/$name-out/summary.json" ]; then
    sets=$("$PY" -c "from ktt.problem import load_problem; print(load_problem('$problem').input_sets)")
    "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); d['_input_sets']=int(sys.argv[2]); print(json.dumps(d))" \
      "$WORK/$name-out/summary.json" "$sets" > "$DEST/$name.summary.json"
  fi
  "$PY" "$KB/eager_time.py" "$problem" > "$DEST/$name.eager.json" 2> "$DEST/$name.eager.err"
done
echo "elapsed: $(( $(date +%s) - start )) s"
if [ "${DRY:-0}" = 1 ]; then exit 0; fi
"$PY" "$KB/table.py" "$DEST" "$KB/kernels"
