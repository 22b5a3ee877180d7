#!/usr/bin/env bash
# The GPU check: run on a CUDA machine (the device tool runs it from the repository root).
#
#   scripts/gpu-check.sh [all|engine|tests|tests-ktt|tests-app|bench|probe|refspread|replay-dry]
#                                                                                (default: all)
#
# 1. installs the wheels carried in .whl/ into /tmp/site (pydantic, kernel_tuner, ...) and runs
#    with PYTHONPATH=/tmp/site:. (the project itself is not pip-installed there);
# 2. probes the machine (GPU, driver, NVRTC, ncu) into $OUT/probe.txt;
# 3. runs the gpu-marked tests (pytest -m gpu) in two halves, tests-ktt and tests-app (each fits one
#    device call; `tests` runs both) -> $OUT/pytest_gpu_{ktt,app}.log, artifacts in $OUT/artifacts;
# 4. runs the benchmark against Kernel Tuner -> $OUT/bench/ (bench.json, logs), and the compile
#    throughput benchmark (bench/compile_throughput.py) -> $OUT/compile/;
# 5. runs the engine-overhead benchmark, then replays the mmul demo session through the engine
#    without --dry-run (real tuning and ncu) -> $OUT/engine_overhead.log, engine_replay.log, engine_output/;
# 6. writes $OUT/summary.txt and prints it last.
set -u -o pipefail
cd "$(dirname "$0")/.."
FINAL="${OUT:-/tmp/ktt-gpu-check}"
# Everything is written under $FINAL/raw and packed into $FINAL/bundle.tgz at the end (the device
# tool brings back at most 8 files); summary.txt stays beside it.
OUT="$FINAL/raw"
mkdir -p "$OUT"
WHAT="${1:-all}"
PY="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export KTT_CACHE_DIR="${KTT_CACHE_DIR:-/tmp/ktt-cache}"
summary="$FINAL/summary.txt"
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }

if ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    > "$OUT/pip.log" 2>&1 || { note "wheel install FAILED (see pip.log)"; }
fi
export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"

{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1
  "$PY" -c 'import sys, cuda.core, cuda.bindings, numpy, pydantic; print(sys.version); print("cuda.core", cuda.core.__version__, "cuda.bindings", cuda.bindings.__version__, "numpy", numpy.__version__, "pydantic", pydantic.__version__)' 2>&1
  "$PY" -c 'from ktt.toolkit import nvrtc_version, cuda_include_dirs, query_device; print("nvrtc", nvrtc_version()); print("include", cuda_include_dirs()); print(query_device(0))' 2>&1
  command -v ncu && ncu --version 2>&1 | tail -1
  nproc
} > "$OUT/probe.txt" 2>&1
command -v ncu >/dev/null && timeout 60 ncu --query-metrics > "$OUT/ncu_query_metrics.txt" 2>&1
note "probe: $(grep -m1 -i h200 "$OUT/probe.txt" || head -2 "$OUT/probe.txt" | tail -1)"

# A quick end-to-end smoke run (tiny problem, 3 configurations): its full output is kept for debugging.
timeout 120 "$PY" -m ktt tune --problem tests/ktt/data/tiny --kernel tests/ktt/data/tiny/kernels.cu \
  --spec tests/ktt/data/tiny/tuning.yaml --output "$OUT/smoke" --max-configs 3 --duration 0 --json \
  --reference-time "$OUT/smoke/reference_time.json" > "$OUT/smoke.log" 2>&1
note "smoke tune: exit $? $(tail -1 "$OUT/smoke.log" | cut -c1-300)"
cp "$OUT"/smoke/work/logs/worker.log "$OUT/smoke_worker.log" 2>/dev/null

if [ "$WHAT" = probe ]; then cat "$summary"; exit 0; fi

# Issue 30, each in a device call of its own (not part of `all`):
# refspread: five `ktt tune` runs of a slow C reference (bench/reference_spread.py, ~3-5 min):
#   their five denominators and how far apart they are (the goal: within 10 %).
# replay-dry: a recording made in a dry run, replayed on the GPU (~3-6 min): it runs to the end
#   of what it recorded and ends `run ok`, no branch failed, no polish branch.
if [ "$WHAT" = refspread ]; then
  start=$(date +%s)
  timeout "${REFSPREAD_TIMEOUT:-560}" "$PY" bench/reference_spread.py --out "$OUT/refspread" ${REFSPREAD_ARGS:-} \
    > "$OUT/refspread.log" 2>&1
  note "reference spread benchmark: exit $? in $(( $(date +%s) - start )) s"
  sed -n '/^reference: /,$p' "$OUT/refspread.log" | tee -a "$summary"
fi
if [ "$WHAT" = replay-dry ]; then
  start=$(date +%s)
  KTT_GPU_TEST_OUT="$OUT/artifacts" timeout "${TESTS_TIMEOUT:-560}" "$PY" -m pytest -m gpu -p no:cacheprovider -q -rs \
    tests/engine/test_replay_recording_end.py > "$OUT/pytest_replay_dry.log" 2>&1
  note "dry-run recording replayed on the GPU: exit $? in $(( $(date +%s) - start )) s: $(tail -1 "$OUT/pytest_replay_dry.log")"
fi

# ---- the engine end to end: the mmul demo session replayed WITHOUT --dry-run ----------------------
# Every kernel of the session is compiled, validated and tuned by ktt on this GPU and profiled with
# ncu; the best one's speedup over the reference is reported. The engine-overhead benchmark runs
# first: after file-heavy work (the replay, another benchmark run) the H200 host's disk reads 5-15 ms
# an iteration higher for any tree (docs/benchmarks.md, 2026-12-02 evening).
if [ "$WHAT" = all ] || [ "$WHAT" = engine ]; then
  timeout 180 "$PY" bench/engine_overhead.py --counts > "$OUT/engine_overhead.log" 2>&1
  note "engine overhead benchmark: exit $?"
  tail -5 "$OUT/engine_overhead.log" | tee -a "$summary"
  work=/tmp/cacao-replay
  rm -rf "$work" && mkdir -p "$work" && cp -r problems/mmul "$work/mmul" && rm -rf "$work/mmul/output" "$work/mmul/archive"
  start=$(date +%s)
  (cd "$work" && timeout "${ENGINE_TIMEOUT:-420}" "$PY" -m cacao_tui --dir mmul --provider replay --no-ui \
      --timeout "${ENGINE_TUNE_S:-6}") > "$OUT/engine_replay.log" 2>&1
  rc=$?
  note "engine replay of problems/mmul/session.jsonl (no --dry-run, --timeout ${ENGINE_TUNE_S:-6}): exit $rc in $(( $(date +%s) - start )) s"
  grep -E "tuned:|profile:|new run best" "$OUT/engine_replay.log" | tee -a "$summary"
  sed -n '/results from/,/^run /p' "$OUT/engine_replay.log" | tee -a "$summary"
  cp -r "$work/mmul/output" "$OUT/engine_output" 2>/dev/null
fi

# The GPU tests in two halves: on the H200 (2026-12-02) the whole of `pytest -m gpu` takes about
# 14 minutes, more than one device call may run (10), so each half goes in a call of its own.
gpu_tests() {  # gpu_tests NAME PATH...
  local name=$1 start rc
  shift
  start=$(date +%s)
  KTT_GPU_TEST_OUT="$OUT/artifacts" timeout "${TESTS_TIMEOUT:-560}" "$PY" -m pytest -m gpu -p no:cacheprovider \
    -q -rs --durations=10 "$@" > "$OUT/pytest_gpu_$name.log" 2>&1
  rc=$?
  note "pytest -m gpu ($name: $*): exit $rc in $(( $(date +%s) - start )) s: $(tail -1 "$OUT/pytest_gpu_$name.log")"
}
if [ "$WHAT" = all ] || [ "$WHAT" = tests ] || [ "$WHAT" = tests-ktt ]; then
  gpu_tests ktt tests/ktt tests/problem tests/security
fi
if [ "$WHAT" = all ] || [ "$WHAT" = tests ] || [ "$WHAT" = tests-app ]; then
  gpu_tests app tests/cluster tests/engine tests/runs
fi

if [ "$WHAT" = all ] || [ "$WHAT" = bench ]; then
  start=$(date +%s)
  timeout "${BENCH_TIMEOUT:-280}" "$PY" bench/tuner_vs_kernel_tuner.py --out "$OUT/bench" ${BENCH_ARGS:-} \
    > "$OUT/bench.log" 2>&1
  rc=$?
  note "benchmark: exit $rc in $(( $(date +%s) - start )) s"
  sed -n '/^figure/,$p' "$OUT/bench.log" | tee -a "$summary"
  # Where NVRTC time goes (GEMM and the cub block reduce), with and without precompiled headers.
  start=$(date +%s)
  timeout "${COMPILE_BENCH_TIMEOUT:-150}" "$PY" bench/compile_throughput.py --configs "${COMPILE_CONFIGS:-60}" \
    --phase-configs 8 --out "$OUT/compile" > "$OUT/compile_throughput.log" 2>&1
  note "compile throughput benchmark: exit $? in $(( $(date +%s) - start )) s"
  tail -40 "$OUT/compile_throughput.log" >> "$summary"
fi

tar czf "$FINAL/bundle.tgz" -C "$OUT" --exclude='*.npy' --exclude='*.cubin' --exclude='*.ncu-rep' . \
  && rm -rf "$OUT"
echo "---- summary ----"
cat "$summary"
