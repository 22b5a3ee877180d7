#!/usr/bin/env bash
# The GPU side of issue 28 (what a real model sees), on a CUDA machine, from the repository root:
#
#   scripts/prompt-facts-gpu-check.sh            (about 2 minutes on an H200)
#
# 1. `ktt tune` of the stencil example (10 s): summary.json carries reference_stats (the reference
#    output's min, max and mean |x| the prompts state the tolerance against);
# 2. `ktt tune` of a kernel that asserts SM_COUNT equals the device's SM count and sizes its grid
#    with it in tuning.yaml (ktt.target): valid on the device;
# 3. `ktt check` of the gemm_bf16 example: the instruction mix of its extremes (SASS through
#    nvdisasm: the nvidia-cuda-nvdisasm wheel in .whl/ or a toolkit; else PTX) with its tensor-core ops.
# Success: three "ok" lines in $OUT/summary.txt. Runs with PYTHONPATH=/tmp/site:. like gpu-check.sh.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/prompt-facts-gpu-check}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1 KTT_CACHE_DIR="${KTT_CACHE_DIR:-/tmp/ktt-cache}"
if ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    > "$OUT/pip.log" 2>&1
fi
export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
summary="$OUT/summary.txt"
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }

# 1. reference_stats in summary.json
timeout 300 "$PY" -m ktt tune --problem problems/stencil --kernel problems/stencil/example/kernels.cu \
  --spec problems/stencil/example/tuning.yaml --output "$OUT/stencil" --duration 10 --json \
  --reference-time "$OUT/stencil/reference_time.json" > "$OUT/stencil.log" 2>&1
"$PY" - "$OUT/stencil/summary.json" <<'EOF' | tee -a "$summary"
import json, sys
s = json.load(open(sys.argv[1]))
stats = s.get("reference_stats") or []
ok = bool(stats) and stats[0]["buffer"] == "OUT" and stats[0]["min"] is not None and stats[0]["nonfinite"] == 0
print(("ok" if ok else "FAILED"), "reference_stats:", json.dumps(stats), "| reference", s.get("reference_ms"), "ms")
EOF

# 2. SM_COUNT on the device
mkdir -p "$OUT/sm"
cat > "$OUT/sm/kernels.cu" <<'EOF'
#include "inputs.hpp"
extern "C" __global__ void scale(const float* __restrict__ X, float* __restrict__ Y) {
    // A persistent grid: SM_COUNT * PER_SM blocks stride over the whole array.
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += gridDim.x * blockDim.x) Y[i] = 3.0f * X[i];
}
EOF
cat > "$OUT/sm/tuning.yaml" <<'EOF'
tune_params: {PER_SM: [1, 2], BLOCK: [128]}
launches:
  - kernel: scale
    grid: {x: "SM_COUNT * PER_SM"}
    block: {x: BLOCK}
EOF
sms=$("$PY" -c 'from ktt.target import device_sm_count; print(device_sm_count(0))')
sed -i "1a static_assert(SM_COUNT == ${sms}, \"SM_COUNT is the device's SM count\");" "$OUT/sm/kernels.cu"
timeout 300 "$PY" -m ktt tune --problem tests/ktt/data/tiny --kernel "$OUT/sm/kernels.cu" --spec "$OUT/sm/tuning.yaml" \
  --output "$OUT/sm/out" --duration 5 --json --reference-time "$OUT/sm/reference_time.json" > "$OUT/sm.log" 2>&1
"$PY" - "$OUT/sm/out/summary.json" "$sms" <<'EOF' | tee -a "$summary"
import json, sys
s = json.load(open(sys.argv[1]))
ok = s.get("ok") and s.get("valid", 0) >= 1
print(("ok" if ok else "FAILED"), f"SM_COUNT={sys.argv[2]}: {s.get('valid')}/{s.get('evaluated')} valid, best {s.get('best', {}).get('config')}")
EOF

# 3. the instruction mix of the gemm_bf16 example's extremes
timeout 600 "$PY" -m ktt check --problem problems/gemm_bf16 --kernel problems/gemm_bf16/example/kernels.cu \
  --spec problems/gemm_bf16/example/tuning.yaml --json > "$OUT/gemm_check.json" 2> "$OUT/gemm_check.err"
"$PY" - "$OUT/gemm_check.json" <<'EOF' | tee -a "$summary"
import json, sys
line = [l for l in open(sys.argv[1]) if l.startswith("{")][-1]
r = json.loads(line)
mixes = [(c["config"], m) for c in r["configs"] for m in c["instruction_mix"]]
tensor = [m["mix"]["counts"].get("tensor", 0) for _, m in mixes]
ok = r["ok"] and mixes and all(t > 0 for t in tensor)
isa = sorted({m["isa"] for _, m in mixes})
print(("ok" if ok else "FAILED"), f"gemm_bf16 check: {len(mixes)} kernel mixes ({', '.join(isa)}), tensor ops {tensor}")
EOF
cat "$summary"
