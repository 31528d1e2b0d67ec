#!/usr/bin/env bash
# Issue 13 on one H200: fidelity at block 256 (test texts, SmolLM2's own text, the weight-sweep
# tuning texts), fidelity at block 64, and end-to-end answer agreement. Every (method, budget)
# cell is resumable; method groups run as parallel processes (SmolLM2 leaves the GPU idle).
#
# Needs in the checkout (ignored, carried; docs/fidelity.md says how to make them):
#   .gpu_in/smollm2.gguf.part_aa, .gpu_in/smollm2.gguf.part_ab  (the 98 MB GGUF in two calls)
#   .gpu_in/datasets/math500.jsonl, .gpu_in/datasets/gsm8k.jsonl
#   .whl/gguf-*.whl                                              (transformers reads GGUF with it)
# Usage: bash scripts/fidelity_gpu.sh [stages...]   stages: smoke b256 b64 agree (default: all)
# Back in $OUT: issue13_reports.tgz (results/*_h200.md/json + agreement cells), issue13_logs.tgz.
# Agreement is generated here and graded on a CPU machine (math-verify is not on the image):
#   python -m scripts.agreement <same flags> --report-only
set -u
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/zipage-out}; LOG=/tmp/issue13_logs; mkdir -p "$OUT" "$LOG"
stages=${*:-smoke b256 b64 agree}
MODEL=/tmp/smollm2.gguf
[ -f $MODEL ] || cat .gpu_in/smollm2.gguf.part_aa .gpu_in/smollm2.gguf.part_ab > $MODEL
echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  $MODEL" | sha256sum -c || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site ZIPAGE_DATA_DIR=$PWD/.gpu_in/datasets

F="python3 -m scripts.fidelity --model $MODEL --text-tokens 4096"
A="python3 -m scripts.agreement --model $MODEL --no-grade"
DEV=results/fidelity_smollm2_dev_sweep.json
S256="--block-size 256 --budgets 1024 2048"
S64="--block-size 64 --budgets 512 1024 2048"
SOL="--num-texts 12 --seed 2 --exclude-sources $DEV"     # the CPU table's 4 texts come first
GEN="--text-source generated --num-texts 12 --seed 3"
TUNE="--num-texts 8 --seed 1 --exclude-sources $DEV results/fidelity_b256_solutions_h200.json"
TABLE="default paper attn attn_global recent random"
WEIGHTS="rw=0 rw=0.1 rw=0.35 rw=0.5 rw=0.65"  # every weight the sweep may pick, on test texts too
SWEEP="rw=0 rw=0.1 default rw=0.35 rw=0.5 rw=0.65 paper attn recent"
GSM="--task gsm8k --num-problems 100 --block-size 16 --budgets 128 256 512 --max-tokens 1024"
MATH="--task math500 --num-problems 100 --block-size 16 --budgets 128 256 512 --max-tokens 1024"
AGREE="default paper attn rw=0 recent random"

bg() {  # name command...: run in the background, log and exit status in $LOG
  local name=$1; shift
  ( "$@" > "$LOG/$name.log" 2>&1; echo "$name rc=$? $SECONDS s" >> "$LOG/status" ) &
}
groups() {  # name-prefix "common flags" methods...: one process per pair of methods
  local name=$1 flags=$2; shift 2
  while [ $# -gt 0 ]; do
    bg "$name.$1" $F $flags --methods $1 ${2:-}; shift; [ $# -gt 0 ] && shift
  done
}
fid() { echo "$1 --out results/fidelity_$2_h200"; }
report() { $F $1 --methods $2 --report-only >> "$LOG/reports.log" 2>&1; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
for s in $stages; do
  t0=$SECONDS; echo "=== $s"
  case $s in
    smoke)  # fails fast (GGUF, kernels) and warms Triton's cache for the parallel processes
      timeout 300 $F --block-size 16 --budgets 128 --num-texts 2 --forced-tokens 64 \
          --methods default --out /tmp/smoke > "$LOG/smoke.log" 2>&1 || { tail -30 "$LOG/smoke.log"; exit 1; } ;;
    b256)
      bg sol.full $F $S256 $SOL --methods --out results/fidelity_b256_solutions_h200
      bg gen.full $F $S256 $GEN --methods --out results/fidelity_b256_generated_h200
      wait
      bg tune.full $F $S256 $TUNE --methods --out results/fidelity_b256_tuning_h200
      groups b256sol "$(fid "$S256 $SOL" b256_solutions)" $TABLE $WEIGHTS
      groups b256gen "$(fid "$S256 $GEN" b256_generated)" $TABLE $WEIGHTS
      wait
      groups b256tune "$(fid "$S256 $TUNE" b256_tuning)" $SWEEP
      wait
      report "$(fid "$S256 $SOL" b256_solutions)" "$TABLE $WEIGHTS"
      report "$(fid "$S256 $GEN" b256_generated)" "$TABLE $WEIGHTS"
      report "$(fid "$S256 $TUNE" b256_tuning)" "$SWEEP" ;;
    b64)
      bg sol64.full $F $S64 $SOL --methods --out results/fidelity_b64_solutions_h200
      bg gen64.full $F $S64 $GEN --methods --out results/fidelity_b64_generated_h200
      wait
      groups b64sol "$(fid "$S64 $SOL" b64_solutions)" $TABLE rw=0 rw=0.5
      groups b64gen "$(fid "$S64 $GEN" b64_generated)" $TABLE rw=0 rw=0.5
      wait
      report "$(fid "$S64 $SOL" b64_solutions)" "$TABLE rw=0 rw=0.5"
      report "$(fid "$S64 $GEN" b64_generated)" "$TABLE rw=0 rw=0.5" ;;
    agree)
      for cfg in "gsm8k_greedy|$GSM" "math500_greedy|$MATH" \
                 "gsm8k_t06|$GSM --temperature 0.6 --samples 8"; do
        name=${cfg%%|*}; flags=${cfg#*|}
        bg "$name.full" $A $flags --methods --out results/agreement_${name}_h200
      done
      wait
      for cfg in "gsm8k_greedy|$GSM" "math500_greedy|$MATH" \
                 "gsm8k_t06|$GSM --temperature 0.6 --samples 8"; do
        name=${cfg%%|*}; flags=${cfg#*|}
        for m in $AGREE; do
          bg "$name.$m" $A $flags --methods $m --out results/agreement_${name}_h200
        done
      done
      wait ;;
  esac
  echo "$s: $((SECONDS - t0)) s"; cat "$LOG/status" 2>/dev/null
done
tar czf "$OUT/issue13_reports.tgz" results/*_h200.md results/*_h200.json \
    results/cells/agreement_*_h200 2>/dev/null
tar czf "$OUT/issue13_logs.tgz" -C /tmp issue13_logs
ls -la "$OUT"
