"""`bench gpu-suite`: named stages of GPU tests and benchmarks in one call."""
