#!/usr/bin/env bash
# One device call: the block-32 configs calibrated with random inputs, then run (a) of issue
# 12 (192 x (128 -> 4096), budget 256 / block 32, pool 200k tokens, both engines, traced).
# smi.csv / phases.txt as in h200_input_power.sh; logs in logs.tgz.
source "$(dirname "$0")/suite_lib.sh"
log_clocks
SUITE_TAIL=6 step calib 200 python -m scripts.bench calibrate --configs zipage/b32 fullkv/b32 \
  --inputs random --out "$OUT/step_cost_h200_qwen3-8b.random_inputs_b32.json"
SUITE_TAIL=8 step val_a 340 python -m scripts.bench long --num-requests 192 --output-len 4096 \
  --budget 256 --block-size 32 --kv-cache-tokens 200000 --trace "$OUT/val_a4k_trace.json.gz" \
  --json "$OUT/val_a4k.json"
stop_clocks
pack_logs
summary
