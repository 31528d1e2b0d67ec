#!/usr/bin/env bash
# One device call: decode GEMMs per BLAS backend (sustained vs burst), W1's shape traced, the
# GPU tests; SM clock, power and throttle reasons sampled every 250 ms the whole time
# (smi.csv), with each step's wall-clock start and end in phases.txt to line them up.
source "$(dirname "$0")/suite_lib.sh"
log_clocks
step gemm 200 python -m scripts.bench gemm --rows 128 256 --seconds 4 --json "$OUT/gemm.json"
step w1 150 python -m scripts.bench long --engines full --num-requests 256 --output-len 512 \
  --temperature 0 --block-size 256 --trace "$OUT/w1_trace.json.gz" --json "$OUT/w1.json"
SUITE_TAIL=15 step gputests 260 python -m pytest -m gpu tests/gpu -q -p no:cacheprovider
stop_clocks
summary
