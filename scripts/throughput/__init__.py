"""Throughput benchmarks of the engine on a GPU: `bench throughput, long, compression, profile,
host, gemm, kernels, dp, fp8` (docs/benchmarks.md)."""
