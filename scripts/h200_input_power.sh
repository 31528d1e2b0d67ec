#!/usr/bin/env bash
# One device call: does the synthetic calibration step draw less power than the engine's
# because its inputs are constant (token 1 in every row, a pool of zeros)? The same four
# points sustained 3 s with constant and with random inputs, then the Full-KV and Zipage
# block-256 calibration with random inputs, then W1 traced. SM clock, power and throttle
# reasons every 250 ms (smi.csv); phases.txt: epoch start/end of each step; logs in logs.tgz.
source "$(dirname "$0")/suite_lib.sh"
log_clocks
points=("decode 256x128" "decode 512x128" "decode 256x1024" "decode 64x4096")
for inputs in constant random; do
  SUITE_TAIL=8 step "probe_$inputs" 100 python -m scripts.bench calibrate --configs fullkv/b256 \
    --inputs $inputs --sustain-s 3 --only "${points[@]}" --out "$OUT/probe_$inputs.json"
done
SUITE_TAIL=6 step calib 260 python -m scripts.bench calibrate --configs fullkv/b256 zipage/b256 \
  --inputs random --out "$OUT/step_cost_h200_qwen3-8b.random_inputs.json"
SUITE_TAIL=12 step w1 120 python -m scripts.bench long --engines full --num-requests 256 \
  --output-len 512 --temperature 0 --block-size 256 --trace "$OUT/w1_trace.json.gz" \
  --json "$OUT/w1.json"
stop_clocks
pack_logs
summary
