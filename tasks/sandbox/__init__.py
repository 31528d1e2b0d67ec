"""Hardened execution of untrusted Python programs (one confined process per run).

    from tasks.sandbox import SandboxConfig, run_program, run_many, probe
    res = run_program(code, "stdin", ["1 2\\n"], cfg=SandboxConfig(timeout_s=2))
    res.end, res.tests[0]["output"], res.isolation["network_isolation"]
"""
from tasks.sandbox.executor import RunResult, SandboxConfig, probe, run_many, run_program

__all__ = ["RunResult", "SandboxConfig", "probe", "run_many", "run_program"]
