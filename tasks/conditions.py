"""Where and under what load a throughput number was measured, so two numbers are only
compared as like with like (host, GPU, torch, CPU load at the start of each segment)."""
from __future__ import annotations

import os
import platform
import sys
import uuid
from datetime import datetime, timezone

LOAD_PER_CORE_TOLERANCE = 0.5   # 1-min load averages per core further apart than this differ


def new_job_id() -> str:
    """One run.py invocation (one evaluate call): segments it times share this id."""
    return uuid.uuid4().hex[:12]


def current(job: str) -> dict:
    torch = sys.modules.get("torch")
    gpu = None
    if torch is not None and torch.cuda.is_available():
        gpu = torch.cuda.get_device_name(torch.cuda.current_device())
    return {"job": job, "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "host": platform.node(), "gpu": gpu,
            "torch": getattr(torch, "__version__", None), "cpu_count": os.cpu_count(),
            "load_avg_1m": round(os.getloadavg()[0], 2)}


def _load_per_core(conds: list[dict]) -> float | None:
    vals = [c["load_avg_1m"] / (c.get("cpu_count") or 1) for c in conds
            if c.get("load_avg_1m") is not None]
    return sum(vals) / len(vals) if vals else None


def differences(a: list[dict], b: list[dict]) -> list[str]:
    """How two sets of segment conditions differ (`a` this run, `b` the baseline)."""
    out = []
    for key in ("host", "gpu", "torch"):
        va, vb = sorted({str(c.get(key)) for c in a}), sorted({str(c.get(key)) for c in b})
        if va != vb:
            out.append(f"{key} {', '.join(va)} vs {', '.join(vb)}")
    la, lb = _load_per_core(a), _load_per_core(b)
    if la is not None and lb is not None and abs(la - lb) > LOAD_PER_CORE_TOLERANCE:
        out.append(f"CPU load per core {la:.2f} vs {lb:.2f} (1-min average at start)")
    return out


def describe(conds: list[dict]) -> str:
    if not conds:
        return "unknown conditions"
    c = conds[0]
    return f"started {c.get('started_at')} on {c.get('host')}" + (
        f" ({c['gpu']})" if c.get("gpu") else "")
