#!/usr/bin/env bash
# Issue 16 on nvidia-h200-x2: tensor parallelism and data-parallel replicas, one device call
# per step (each < 10 min); logs and JSON under $OUT, the summary last.
# Usage: bash scripts/multi_gpu_suite.sh [steps...]
#   steps: tests tp_throughput long_14b dp       (default: tests dp)
#   tests          pytest: TP=2 == TP=1 fp32 tiny model (engine and model level), 8B-shape pool (~3 min)
#   tp_throughput  Qwen3-8B shape, 256 x (128 in, 512 out), TP=1 then TP=2 (~5 min)
#   long_14b       Qwen3-14B shape at TP=2, long-reasoning benchmark, Zipage vs Full KV (~8 min)
#   dp             Qwen3-8B shape, 1 engine vs 2 replicas on the same 512 x 1024 workload (~6 min)
source "$(dirname "$0")/suite_lib.sh"
SUITE_TAIL=25
steps=${*:-tests dp}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
bench="python3 -m scripts.bench"
for s in $steps; do
  case $s in
    tests) run tests 580 python3 -m pytest -m gpu -rA tests/distributed/test_tp_engine_gpu.py \
             tests/distributed/test_tp_gpu.py ;;
    tp_throughput)
      run tp1 280 $bench throughput --skip-hf --json "$OUT/tp1.json"
      run tp2 280 $bench throughput --skip-hf --tensor-parallel-size 2 --json "$OUT/tp2.json" ;;
    long_14b) run long_14b 580 $bench long --model qwen3-14b --tensor-parallel-size 2 \
                --num-requests 192 --output-len 4096 --budget 256 --block-size 32 \
                --json "$OUT/long_14b_tp2.json" ;;
    dp) run dp 580 $bench dp --replicas 2 --num-requests 512 --output-len 1024 \
          --json "$OUT/dp.json" ;;
    *) echo "unknown step $s"; status[$s]="unknown step"; ran+=("$s") ;;
  esac
done
summary
