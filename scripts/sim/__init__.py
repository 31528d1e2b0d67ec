"""Throughput of workloads too long to measure: `bench calibrate` (step-cost model of the real
runner, GPU; refits on the CPU) and `bench simulate` (the real scheduler on that model)."""
