"""Measured runs for validation, in the report format of zipage/sim/report.py: a ``bench long
--json`` report as it is, or a ``bench throughput --json`` result (the W1 format: ``ours``
with engine stats, ``workload``, ``engine_options``) converted to one. Only a Full-KV
throughput result converts: a Zipage one names its scoring by preset, not by its options.
"""
import json
from pathlib import Path

from zipage.sim import report as rp

THROUGHPUT_KEYS = {"workload", "engine_options", "ours"}


def load_measured(path: str) -> dict:
    data = json.loads(Path(path).read_text())
    if data.get("format") == rp.REPORT_FORMAT:
        return data
    if isinstance(data, dict) and THROUGHPUT_KEYS <= set(data):
        return from_throughput(data, path)
    rp.check_report(data, path)  # raises with the format's name
    return data


def from_throughput(data: dict, path: str = "throughput result") -> dict:
    w, e, ours = data["workload"], data["engine_options"], data["ours"]
    if w.get("budget") is not None or e.get("budget") is not None:
        raise ValueError(f"{path}: a Zipage `bench throughput` result cannot be converted "
                         f"(its scoring is a preset name); measure it with `bench long --json`")
    stats = ours["stats"]
    block = e["block_size"]
    asynchronous = bool(e.get("async_scheduling", w.get("async_scheduling", False)))
    options = dict(load_format="dummy", seed=w.get("seed", 0), block_size=block,
                   max_num_seqs=e["max_num_seqs"],
                   max_num_batched_tokens=e["max_num_batched_tokens"],
                   max_model_len=e["max_model_len"],
                   enable_prefix_caching=e.get("enable_prefix_caching", True),
                   enforce_eager=e.get("enforce_eager", False), async_scheduling=asynchronous,
                   kv_cache_tokens=stats["num_kv_blocks"] * block)
    entry = rp.engine_entry(
        output_tokens=ours["num_output_tokens"], wall_time_s=ours["wall_time_s"],
        steps=stats["num_steps"], mean_running=stats["mean_running"],
        preemptions=stats["num_preemptions"], compressions=stats["num_compressions"],
        num_kv_blocks=stats["num_kv_blocks"], block_size=block, options=options)
    entry["output_tokens_per_s"] = ours["output_tokens_per_s"]  # as measured (same wall)
    env = data.get("environment", {})
    return rp.build_report("measured", model=w["model"], gpu=env.get("gpu"),
                           output_len=w["output_len"], num_requests=w["num_requests"],
                           prompt_len=w["prompt_len"], budget=None, block_size=block,
                           async_scheduling=asynchronous, engines={"fullkv": entry},
                           temperature=w.get("temperature", 0.0), seed=w.get("seed", 0),
                           converted_from="bench throughput")
