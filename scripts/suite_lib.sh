# Shared by the one-device-call suites (h200_suite.sh, multi_gpu_suite.sh); source it.
# run NAME LIMIT COMMAND...: logs to $OUT/NAME.log, prints its last $SUITE_TAIL lines, and
# records "rc=R Ns" in status[NAME]; summary prints status in the order steps ran.
# Clock-logged suites: log_clocks starts nvidia-smi (SM clock, power, throttle reasons every
# 250 ms to $OUT/smi.csv); step NAME LIMIT COMMAND... is run with its epoch start/end in
# $OUT/phases.txt; stop_clocks ends the logging; pack_logs puts the *.log files in logs.tgz
# (a call returns at most 8 files).
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
log_clocks() {
  local q=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active
  nvidia-smi --query-gpu=$q --format=csv -lms 250 > "$OUT/smi.csv" 2>&1 &
  smi_pid=$!
}
stop_clocks() { kill "$smi_pid"; }
phase() { echo "$1 $(date +%s.%N)" >> "$OUT/phases.txt"; }
step() { local name=$1; phase "$name-start"; run "$@"; phase "$name-end"; }
pack_logs() { (cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log); }
