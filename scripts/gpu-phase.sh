#!/usr/bin/env bash
# The GPU phase of a split run on a CUDA machine (docs/CLUSTER.md, "Split runs"): the device
# tool runs it from the repository root with the problem directory's output/ carried in.
#
#   scripts/gpu-phase.sh PROBLEM_DIR [cacao flags, e.g. --timeout 15]
#
# 1. installs the wheels carried in .whl/ into /tmp/site, as scripts/gpu-check.sh does, and runs
#    with PYTHONPATH=/tmp/site:. (the project is not pip-installed there);
# 2. runs `cacao --dir PROBLEM_DIR --resume --phase gpu --no-ui`: the tunings and profiles every
#    branch waits for (and the device table the first time). No LLM call, no key, no network;
#    the output/ may come from another machine (its state holds no absolute path);
# 3. writes to $OUT (default /tmp/gpu-phase-out):
#      summary.txt    the phase's exit status and last line (what waits next), and --best
#      gpu_phase.log  the phase's progress lines
#      gpu_output.tgz the updated output/ without compiled binaries, array dumps, caches and ncu
#                     reports (scripts/pack_output.py); above 15 MiB it comes as .part00, .part01 ...
# Back on the model's machine: tar xzf gpu_output.tgz -C PROBLEM_DIR (or cat the parts into
# `tar xz -C PROBLEM_DIR`), then `cacao --dir PROBLEM_DIR --resume --phase llm ...`.
set -u -o pipefail
cd "$(dirname "$0")/.."
dir="${1:?usage: scripts/gpu-phase.sh PROBLEM_DIR [cacao flags]}"
shift
OUT="${OUT:-/tmp/gpu-phase-out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export KTT_CACHE_DIR="${KTT_CACHE_DIR:-/tmp/ktt-cache}"
summary="$OUT/summary.txt"
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }

if ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    > "$OUT/pip.log" 2>&1 || note "wheel install FAILED (see pip.log)"
fi
export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"

if [ ! -f "$dir/output/context.json" ]; then
  note "$dir/output: no run to continue (carry the output/ the model's phase wrote)"
  exit 2
fi
start=$(date +%s)
"$PY" -m cacao_tui --dir "$dir" --resume --phase gpu --no-ui "$@" > "$OUT/gpu_phase.log" 2>&1
rc=$?
note "gpu phase of $dir: exit $rc in $(( $(date +%s) - start )) s"
note "$(tail -1 "$OUT/gpu_phase.log")"
grep -E "device table|tuned:|profile|new (run|branch) best|error|Traceback" "$OUT/gpu_phase.log" | tail -40 >> "$summary"
"$PY" -m cacao_tui --dir "$dir" --best >> "$summary" 2>&1
"$PY" scripts/pack_output.py "$dir/output" "$OUT/gpu_output.tgz" | tee -a "$summary"
echo "---- summary ----"
cat "$summary"
exit "$rc"
