"""Predict a measured run (a ``bench long --json`` report) with the simulator: the same
workload, the same engine options and the same pool (the measured number of KV blocks), so
only the cost model is under test; step, preemption and compression counts must match.
"""
import json

from zipage.models.spec import ModelSpec
from zipage.sim import report as rp
from zipage.sim.cost_model import CostModel
from zipage.sim.measured import load_measured
from zipage.sim.simulate import make_requests, simulate
from zipage.sim.trace import features_of, read_traces, summarize


def load_report(path: str) -> dict:
    """A measured run in the report format (``bench long --json``, or a converted ``bench
    throughput --json`` result: zipage/sim/measured.py)."""
    return load_measured(path)


def _same(a: dict, b: dict) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def mark_samples(rows: list[dict], measured: dict, cost_for) -> list[dict]:
    """Each engine row gets ``sample``: "in-sample" when its cost model was fitted to a
    trace of a run with these very engine options (this run, or its exact twin), else
    "held-out" (the grid's synthetic steps never are the run)."""
    kinds = {}
    for r in rows:
        r["error_pct"] = 100 * (r["ratio"] - 1)
        if r["engine"] not in rp.ENGINES:  # the speedup row: in-sample if either engine is
            r["sample"] = "in-sample" if "in-sample" in kinds.values() else "held-out"
            continue
        options = measured[r["engine"]]["options"]
        fitted = cost_for(r["engine"], measured["block_size"],
                          kv_dtype(options)).meta.get("fitted_options", [])
        r["sample"] = kinds[r["engine"]] = ("in-sample" if any(_same(options, o)
                                                               for o in fitted) else "held-out")
    return rows


def report_spec(report: dict) -> ModelSpec | None:
    shape = report.get("model_shape")
    return ModelSpec(**shape) if shape else None


def measured_lengths(measured: dict) -> list[int]:
    """Each request's output length, in request order: fixed, or as drawn for the run."""
    n, length = measured["num_requests"], measured["output_len"]
    if isinstance(length, int):
        return [length] * n
    if len(length.get("lengths") or []) != n:
        raise ValueError(f"the report's output_len ({length.get('kind')}) does not list the "
                         f"{n} drawn lengths; only runs that record them can be predicted")
    return list(length["lengths"])


def mean_length(length) -> float:
    """A report's output_len as one number: the fixed length, or the drawn (else the asked)
    mean of a distribution."""
    if isinstance(length, int):
        return length
    return length.get("drawn_mean") or length["mean"]


def describe_lengths(length) -> str:
    if isinstance(length, int):
        return str(length)
    return f"{length['kind']} mean {mean_length(length):.0f} cap {length.get('cap')}"


def kv_dtype(options: dict) -> str:
    """A run's KV dtype ("auto": the model dtype; runs before the option existed had it)."""
    return options.get("kv_cache_dtype", "auto")


def predict_report(measured: dict, cost_for, copy_bandwidth_Bps: float | None = None) -> dict:
    """The simulated twin of a measured report; ``cost_for(engine, block_size,
    kv_cache_dtype)`` gives the cost model of each engine (an FP8 run: the FP8 configs)."""
    engines = {}
    for name in rp.ENGINES:
        m = measured.get(name)
        if not m:
            continue
        options = dict(m["options"], kv_cache_tokens=m["pool_tokens"])
        # Runs recorded before the option existed were synchronous (the default then).
        options.setdefault("async_scheduling", measured.get("async_scheduling", False))
        requests = make_requests(measured_lengths(measured), measured["prompt_len"])
        engines[name] = simulate(measured["model"], options, requests,
                                 cost_for(name, measured["block_size"], kv_dtype(options)),
                                 seed=measured.get("seed", 0),
                                 temperature=measured.get("temperature", 0.6),
                                 copy_bandwidth_Bps=copy_bandwidth_Bps,
                                 spec=report_spec(measured))
    keys = ("model", "gpu", "output_len", "num_requests", "prompt_len", "budget", "block_size",
            "async_scheduling")
    return rp.build_report("simulated", **{k: measured[k] for k in keys}, engines=engines,
                           model_shape=measured.get("model_shape"))


def trace_breakdown(trace_path: str, predicted: dict, cost_for, block_size: int) -> list[str]:
    """Where a prediction differs: per engine, the measured trace's device and host totals
    next to the simulation's, and the cost model's device time on the measured steps."""
    lines = []
    for name, trace in read_traces(trace_path).items():
        records, p = trace["records"], predicted.get(name)
        if not p or not records:
            continue
        opts = trace["options"]
        cost: CostModel = cost_for(name, block_size, kv_dtype(opts)).for_engine(
            opts.get("max_num_seqs", 512), opts.get("enforce_eager", False))
        t = summarize(records)
        model_device = sum(cost.device_s(features_of(r)) for r in records)
        host = t["schedule_s"] + t["launch_s"] + t["post_s"]
        device = f"{t['device_s']:.2f}" if t["device_s"] is not None else "n/a"
        ratio = f"{model_device / t['device_s']:.3f}" if t["device_s"] else "n/a"
        lines.append(
            f"{name}: measured wall {t['wall_s']:.2f} s, device {device} s, host {host:.2f} s "
            f"(schedule {t['schedule_s']:.2f}, launch {t['launch_s']:.2f}, post "
            f"{t['post_s']:.2f}); simulated wall {p['wall_time_s']:.2f} s, device busy "
            f"{p['device_busy_s']:.2f} s, host {p['host_s']:.2f} s; cost model on the "
            f"measured steps: device {model_device:.2f} s (model / measured {ratio})")
    return lines


def markdown_table(runs: list[tuple[str, list[dict]]]) -> str:
    """Predicted vs measured for every run and engine."""
    out = ["| run | engine | sample | measured tok/s | predicted tok/s | error | "
           "within ±10% | steps m/p | preemptions m/p | compressions m/p |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for run, rows in runs:
        for r in rows:
            counts = ["", "", ""]
            if "steps_measured" in r:
                counts = [f"{r[f'{k}_measured']}/{r[f'{k}_predicted']}"
                          for k in ("steps", "preemptions", "compressions")]
            fmt = "{:.2f}x" if r["engine"] == "speedup" else "{:,.0f}"
            out.append(f"| {run} | {r['engine']} | {r.get('sample', '')} | "
                       f"{fmt.format(r['measured_tok_s'])} | {fmt.format(r['predicted_tok_s'])} | "
                       f"{100 * (r['ratio'] - 1):+.1f}% | "
                       f"{'yes' if r['within_tolerance'] else '**no**'} | "
                       + " | ".join(counts) + " |")
    return "\n".join(out) + "\n"
