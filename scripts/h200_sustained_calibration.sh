#!/usr/bin/env bash
# One device call: the step-cost calibration with each point sustained (--sustain-s), the
# decode GEMMs per BLAS backend; SM clock, power and throttle reasons every 250 ms (smi.csv,
# phases.txt as in h200_clock_probe.sh).
source "$(dirname "$0")/suite_lib.sh"
log_clocks
SUITE_TAIL=12 step calib 330 python -m scripts.bench calibrate --sustain-s "${SUSTAIN_S:-0.5}" \
  --out "$OUT/step_cost_h200_qwen3-8b.sustained.json"
step gemm 150 python -m scripts.bench gemm --rows 256 --seconds 3 --json "$OUT/gemm.json"
stop_clocks
summary
