#!/usr/bin/env bash
# The CPU suite under load: pytest while busy loops hold the machine's cores, as on a shared
# 2-core machine where other work runs beside the tests. A test that waits on time instead of a
# condition fails here; one that waits on its condition passes.
#
#   scripts/test-under-load.sh [options] [PYTEST_ARGS...]
#
#   PYTEST_ARGS      what to run: test paths, node ids, -k EXPR, -x ... (default: the whole suite,
#                    `tests`); anything pytest takes is passed on
#   --loops N        how many busy loops (default 2); loop i is pinned on core i mod nproc
#   --repeat N       run the same selection N times in a row, stopping at the first failing
#                    round (default 1; the issue's closing check is --repeat 3)
#   --log DIR        where each round's pytest output goes (default: a new directory under
#                    ${TMPDIR:-/tmp}); the summary names it
#   -h, --help       this text
#
# Prints one summary line per round (passed/failed/errors/skipped and seconds), the failed tests
# by node id, and a last line `under load: N of M rounds passed`. Exit 0 only when every round
# passed; 1 when a round failed; 2 for a bad option. The busy loops are ended on every exit
# (by their process ids), Ctrl-C included.
set -u -o pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "test-under-load: $*" >&2; exit 2; }

loops=2
repeat=1
logdir=""
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --loops) [ $# -ge 2 ] || die "--loops needs a number"; loops=$2; shift 2 ;;
    --loops=*) loops=${1#*=}; shift ;;
    --repeat) [ $# -ge 2 ] || die "--repeat needs a number"; repeat=$2; shift 2 ;;
    --repeat=*) repeat=${1#*=}; shift ;;
    --log) [ $# -ge 2 ] || die "--log needs a directory"; logdir=$2; shift 2 ;;
    --log=*) logdir=${1#*=}; shift ;;
    -h|--help) usage; exit 0 ;;
    *) args+=("$1"); shift ;;
  esac
done
[[ "$loops" =~ ^[0-9]+$ ]] || die "--loops: '$loops' is not a whole number"
[[ "$repeat" =~ ^[1-9][0-9]*$ ]] || die "--repeat: '$repeat' is not a number >= 1"
[ ${#args[@]} -gt 0 ] || args=(tests)

if [ -z "${PYTHON:-}" ]; then
  if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
"$PYTHON" -c 'import pytest' 2>/dev/null || die "$PYTHON has no pytest (activate the virtualenv or set PYTHON)"
if [ -z "$logdir" ]; then
  logdir=$(mktemp -d "${TMPDIR:-/tmp}/test-under-load.XXXXXX") || die "cannot make a log directory"
fi
mkdir -p "$logdir" || die "--log: cannot create $logdir"

cores=$(nproc 2>/dev/null || echo 1)
pids=()
stop_loops() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null; done
  pids=()
}
trap stop_loops EXIT
trap 'stop_loops; exit 130' INT
trap 'stop_loops; exit 143' TERM

for ((i = 0; i < loops; i++)); do
  core=$((i % cores))
  if command -v taskset >/dev/null 2>&1; then
    taskset -c "$core" bash -c 'while :; do :; done' &
  else
    bash -c 'while :; do :; done' &
  fi
  pids+=($!)
done
pinned="pinned"
command -v taskset >/dev/null 2>&1 || pinned="not pinned (no taskset)"
echo "test-under-load: $loops busy loop(s) on $cores core(s), $pinned; pytest ${args[*]}; logs in $logdir"

passed_rounds=0
summaries=()
failed_ids=()
for ((round = 1; round <= repeat; round++)); do
  log="$logdir/round$round.log"
  start=$(date +%s)
  "$PYTHON" -m pytest -p no:cacheprovider -q -rfE "${args[@]}" > "$log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  # pytest's last line: "3 failed, 120 passed, 2 skipped in 80.1s" (with -q; "== ... ==" without).
  tally=$(grep -E '^(=+ )?([0-9]+ [a-z]+|no tests ran).* in [0-9.]+s' "$log" | tail -1 \
    | sed -E 's/^=+ //; s/ =+$//; s/ in [0-9.]+s.*$//')
  [ -n "$tally" ] || tally="no pytest summary (exit $rc; see $log)"
  if [ "$rc" -eq 0 ]; then
    verdict=passed
    passed_rounds=$((passed_rounds + 1))
  else
    verdict="FAILED (pytest exit $rc)"
  fi
  line="round $round: $verdict: $tally in ${secs} s"
  summaries+=("$line")
  echo "$line"
  while IFS= read -r id; do
    [ -n "$id" ] && failed_ids+=("round $round: $id") && echo "  $id"
  done < <(grep -E '^(FAILED|ERROR) ' "$log" | sed -E 's/ - .*$//')
  [ "$rc" -eq 0 ] || break
done

stop_loops
echo "---- summary ----"
for line in "${summaries[@]}"; do echo "$line"; done
for id in "${failed_ids[@]}"; do echo "$id"; done
echo "under load ($loops busy loops on $cores cores): $passed_rounds of $repeat rounds passed; logs in $logdir"
[ "$passed_rounds" -eq "$repeat" ]
