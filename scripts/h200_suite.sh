#!/usr/bin/env bash
# One device call: kernel checks, engine checks, throughput benchmark; summary table last.
# Usage: bash scripts/h200_suite.sh [steps...]
#   steps: attn comp sampler kernels engine bench long long_async; default: all but long,
#   long_async
#   (each long-reasoning run takes ~5 min of device time)
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/zipage-out}; mkdir -p "$OUT"
steps=${*:-attn comp sampler kernels engine bench}
LONG="--num-requests 192 --output-len 4096 --budget 256 --block-size 32 --kv-cache-tokens 200000"
declare -A status
run() {  # name timeout command...
  local name=$1 limit=$2; shift 2
  echo "=== $name: $*"
  local t0=$SECONDS
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  tail -n 40 "$OUT/$name.log"
  status[$name]="rc=$rc $((SECONDS - t0))s"
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch, triton, transformers; print('torch', torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__)"
for s in $steps; do
  case $s in
    attn) run attn 240 python3 -m pytest -m gpu -q -s tests/gpu/test_attention_kernels.py ;;
    comp) run comp 240 python3 -m pytest -m gpu -q -s tests/gpu/test_compression_kernels.py ;;
    sampler) run sampler 120 python3 -m pytest -m gpu -q -s tests/gpu/test_sampler_kernel.py ;;
    kernels) run kernels 300 python3 scripts/kernels.py --json "$OUT/kernels.json" ;;
    engine) run engine 300 python3 scripts/gpu_engine_check.py ;;
    bench) run bench 420 python3 scripts/bench_throughput.py --json "$OUT/bench.json" ;;
    long) run long 540 python3 scripts/bench_long_reasoning.py $LONG --json "$OUT/long.json" ;;
    long_async) run long_async 540 python3 scripts/bench_long_reasoning.py $LONG --async-scheduling \
        --json "$OUT/long_async.json" ;;
  esac
done
echo "=== summary"; for s in $steps; do echo "$s: ${status[$s]}"; done
