#!/usr/bin/env bash
# One device call: a run whose requests end at drawn lengths (capped lognormal mean 4096,
# cap 8192, seed 0), 160 requests, budget 2048 / block 256, whole GPU, each engine in its own
# process (Zipage first) so a time-out keeps the finished one; traced.
source "$(dirname "$0")/suite_lib.sh"
args=(--num-requests 160 --mean-output-len 4096 --output-len 8192 --budget 2048 --block-size 256)
SUITE_TAIL=4 run zipage 170 python -m scripts.bench long --engines zipage "${args[@]}" \
  --trace "$OUT/staggered_zipage_trace.json.gz" --json "$OUT/staggered_zipage.json"
SUITE_TAIL=4 run full 230 python -m scripts.bench long --engines full "${args[@]}" \
  --trace "$OUT/staggered_full_trace.json.gz" --json "$OUT/staggered_full.json"
summary
