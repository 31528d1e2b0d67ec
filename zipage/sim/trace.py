"""Per-step traces of measured runs: features, host timings and device time of every step,
so a measured run doubles as calibration and validation data.

    tracer = StepTracer.attach(llm)      # engine.on_step + runner.time_steps (CUDA events)
    llm.generate(...)
    write_traces("trace.json.gz", {"zipage": tracer.table(options)})

A trace file is JSON (gzip when the name ends in .gz): {"format": TRACE_FORMAT, "engines":
{name: {"options": {...}, "columns": [...], "rows": [[...], ...]}}}, one row per collected
step in collection order. Columns: the StepFeatures fields, then schedule_s, launch_s,
wait_s, post_s (host perf_counter seconds), end (perf_counter at the end of the step's
post-processing), device_s (CUDA-event time of the whole step, null without CUDA) and
compression_s. Recording costs one pass over the step's rows per step (host time).
"""
import gzip
import json
from dataclasses import fields
from pathlib import Path

from zipage.sim.features import StepFeatures, step_features

TRACE_FORMAT = "zipage-trace/1"
FEATURES = [f.name for f in fields(StepFeatures)]
TIMINGS = ["schedule_s", "launch_s", "wait_s", "post_s", "end", "device_s", "compression_s"]
COLUMNS = FEATURES + TIMINGS


class StepTracer:
    """``LLMEngine.on_step`` callback: one row per collected step."""

    def __init__(self):
        self.rows: list[list] = []

    @classmethod
    def attach(cls, llm) -> "StepTracer":
        tracer = cls()
        llm.engine.on_step = tracer
        if hasattr(llm.runner, "time_steps"):
            llm.runner.time_steps = True
        return tracer

    @staticmethod
    def detach(llm) -> None:
        llm.engine.on_step = None
        if hasattr(llm.runner, "time_steps"):
            llm.runner.time_steps = False

    def __call__(self, step, result, timing) -> None:
        f = step_features(step)
        self.rows.append([getattr(f, n) for n in FEATURES] + [
            timing.schedule_s, timing.launch_s, timing.wait_s, timing.post_s, timing.end,
            result.device_time_s, result.compression_time_s])

    def table(self, options: dict | None = None) -> dict:
        return {"options": options or {}, "columns": COLUMNS, "rows": self.rows}


def write_traces(path: str, engines: dict[str, dict]) -> None:
    data = json.dumps({"format": TRACE_FORMAT, "engines": engines}, default=str).encode()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_bytes(gzip.compress(data) if path.endswith(".gz") else data)
    print(f"== trace written to {path}")


def read_traces(path: str) -> dict[str, dict]:
    """{engine: {"options": engine options, "records": [one dict per step]}}; an error
    names the file if it is not a trace."""
    raw = Path(path).read_bytes()
    data = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    if not isinstance(data, dict) or data.get("format") != TRACE_FORMAT:
        raise ValueError(f"{path} is not a step trace of format {TRACE_FORMAT!r} "
                         f"(written by `bench long --trace`)")
    return {name: {"options": t["options"],
                   "records": [dict(zip(t["columns"], row)) for row in t["rows"]]}
            for name, t in data["engines"].items()}


def features_of(record: dict) -> StepFeatures:
    return StepFeatures(**{n: record[n] for n in FEATURES})


def summarize(records: list[dict]) -> dict:
    """Totals of a trace: device, host phases, and the wall time the steps spanned."""
    first = records[0]
    phases = ("schedule_s", "launch_s", "wait_s", "post_s")
    start = first["end"] - sum(first[k] for k in phases)
    device = [r["device_s"] for r in records if r["device_s"] is not None]
    return {"steps": len(records), "wall_s": records[-1]["end"] - start,
            "device_s": sum(device) if len(device) == len(records) else None,
            **{k: sum(r[k] for r in records) for k in phases}}
