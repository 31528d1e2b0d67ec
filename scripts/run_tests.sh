#!/usr/bin/env bash
# The test command (CPU): Triton kernels in the interpreter first, then everything else.
# TRITON_INTERPRET must be fixed before Triton is imported, hence two pytest processes.
set -euo pipefail
cd "$(dirname "$0")/.."
TRITON_INTERPRET=1 ZIPAGE_REQUIRE_TRITON=1 python -m pytest -q tests/kernels tests/compression "$@"
python -m pytest -q --durations=15 tests --ignore=tests/kernels --ignore=tests/compression "$@"
