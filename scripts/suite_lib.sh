# Shared by the one-device-call suites (h200_suite.sh, multi_gpu_suite.sh); source it.
# run NAME LIMIT COMMAND...: logs to $OUT/NAME.log, prints its last $SUITE_TAIL lines, and
# records "rc=R Ns" in status[NAME]; summary prints status in the order steps ran.
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/zipage-out}; mkdir -p "$OUT"
declare -A status
ran=()
run() {
  local name=$1 limit=$2; shift 2
  echo "=== $name: $*"
  local t0=$SECONDS
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  tail -n "${SUITE_TAIL:-40}" "$OUT/$name.log"
  status[$name]="rc=$rc $((SECONDS - t0))s"
  ran+=("$name")
}
summary() { echo "=== summary"; for s in "${ran[@]}"; do echo "$s: ${status[$s]}"; done; }
