#!/usr/bin/env bash
# One device call: GPU tests, then benchmarks; logs under $OUT, the summary table last.
# Usage: bash scripts/h200_suite.sh [steps...]
#   steps: gpu quick bench long long_async compression profile kernels
#   default: gpu bench (each long-reasoning run takes ~5 min of device time)
source "$(dirname "$0")/suite_lib.sh"
steps=${*:-gpu bench}
LONG="--num-requests 192 --output-len 4096 --budget 256 --block-size 32 --kv-cache-tokens 200000"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch, triton, transformers; print('torch', torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__)"
bench="python3 -m scripts.bench"
for s in $steps; do
  case $s in
    gpu) run gpu 540 python3 -m pytest -m gpu tests/gpu -rA --junitxml="$OUT/gpu.xml" ;;
    quick) run quick 240 python3 -m pytest -m "gpu and quick" tests/gpu -rA ;;
    bench) run bench 420 $bench throughput --json "$OUT/bench.json" ;;
    long) run long 540 $bench long $LONG --json "$OUT/long.json" ;;
    long_async) run long_async 540 $bench long $LONG --async-scheduling --json "$OUT/long_async.json" ;;
    compression) run compression 300 $bench compression --json "$OUT/compression.json" ;;
    profile) run profile 300 $bench profile --json "$OUT/profile.json" ;;
    kernels) run kernels 300 $bench kernels --json "$OUT/kernels.json" ;;
    *) echo "unknown step $s"; status[$s]="unknown step"; ran+=("$s") ;;
  esac
done
summary
