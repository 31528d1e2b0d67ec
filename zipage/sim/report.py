"""One report format for measured (``bench long --json``) and simulated (``bench simulate``)
throughput runs, and the measured-vs-predicted comparison.

    {"format": REPORT_FORMAT, "source": "measured" | "simulated", "model", "gpu",
     "output_len": int or a distribution, "num_requests", "prompt_len", "budget",
     "block_size", "async_scheduling", "pool_tokens": {engine: tokens},
     "fullkv": ENGINE, "zipage": ENGINE, "speedup": zipage / fullkv tok/s (or null), ...}
    ENGINE = {"output_tokens_per_s", "roofline_fraction", "mean_running", "preemptions",
              "compressions", "steps", "wall_time_s", "output_tokens", "pool_tokens",
              "num_kv_blocks", "options" (engine options, enough to rerun it), ...}

``roofline_fraction`` = bytes read over the run (per step: decode weights + KV attended) /
(copy bandwidth x wall time): the fraction of the measured device-copy bandwidth achieved.
"""
REPORT_FORMAT = "zipage-throughput/1"
ENGINES = ("fullkv", "zipage")
TOLERANCE = 0.10  # the validation criterion: |predicted / measured - 1| <= 10% on tok/s


def engine_entry(*, output_tokens: int, wall_time_s: float, steps: int, mean_running: float,
                 preemptions: int, compressions: int, num_kv_blocks: int, block_size: int,
                 options: dict, bytes_read: float | None = None,
                 copy_bandwidth_Bps: float | None = None, **extra) -> dict:
    roofline = None
    if bytes_read is not None and copy_bandwidth_Bps and wall_time_s > 0:
        roofline = bytes_read / (copy_bandwidth_Bps * wall_time_s)
    return dict(output_tokens_per_s=output_tokens / wall_time_s if wall_time_s > 0 else 0.0,
                roofline_fraction=roofline, mean_running=mean_running, preemptions=preemptions,
                compressions=compressions, steps=steps, wall_time_s=wall_time_s,
                output_tokens=output_tokens, pool_tokens=num_kv_blocks * block_size,
                num_kv_blocks=num_kv_blocks, bytes_read=bytes_read, options=options, **extra)


def build_report(source: str, *, model: str, gpu: str | None, output_len, num_requests: int,
                 prompt_len, budget: int, block_size: int, async_scheduling: bool,
                 engines: dict[str, dict], **extra) -> dict:
    unknown = set(engines) - set(ENGINES)
    if unknown:
        raise ValueError(f"unknown engine names {sorted(unknown)}; use {ENGINES}")
    speedup = None
    if all(e in engines for e in ENGINES) and engines["fullkv"]["output_tokens_per_s"] > 0:
        z, f = engines["zipage"], engines["fullkv"]
        speedup = z["output_tokens_per_s"] / f["output_tokens_per_s"]
    return dict(format=REPORT_FORMAT, source=source, model=model, gpu=gpu, output_len=output_len,
                num_requests=num_requests, prompt_len=prompt_len, budget=budget,
                block_size=block_size, async_scheduling=async_scheduling,
                pool_tokens={k: v["pool_tokens"] for k, v in engines.items()},
                **{k: engines.get(k) for k in ENGINES}, speedup=speedup, **extra)


def check_report(report: dict, path: str = "report") -> None:
    if report.get("format") != REPORT_FORMAT:
        raise ValueError(f"{path} is not a throughput report of format {REPORT_FORMAT!r} "
                         f"(written by `bench long --json` or `bench simulate --json`; older "
                         f"`long` JSON files predate it)")


def compare(measured: dict, predicted: dict) -> list[dict]:
    """One row per engine present in both: tok/s, ratio, within tolerance, and the counts
    that a faithful simulation reproduces exactly (steps, preemptions, compressions)."""
    rows, counts = [], ("steps", "preemptions", "compressions")
    for name in ENGINES:
        m, p = measured.get(name), predicted.get(name)
        if not m or not p:
            continue
        ratio = p["output_tokens_per_s"] / m["output_tokens_per_s"]
        rows.append(dict(engine=name, measured_tok_s=m["output_tokens_per_s"],
                         predicted_tok_s=p["output_tokens_per_s"], ratio=ratio,
                         within_tolerance=abs(ratio - 1) <= TOLERANCE,
                         **{f"{k}_measured": m[k] for k in counts},
                         **{f"{k}_predicted": p[k] for k in counts}))
    if measured.get("speedup") and predicted.get("speedup"):
        ratio = predicted["speedup"] / measured["speedup"]
        rows.append(dict(engine="speedup", measured_tok_s=measured["speedup"],
                         predicted_tok_s=predicted["speedup"], ratio=ratio,
                         within_tolerance=abs(ratio - 1) <= TOLERANCE))
    return rows


def format_comparison(rows: list[dict]) -> str:
    lines = [f"{'engine':<9}{'measured':>11}{'predicted':>11}{'pred/meas':>11}  ±10%"
             f"{'steps m/p':>18}{'preempt m/p':>14}{'compress m/p':>16}"]
    for r in rows:
        counts = ""
        if "steps_measured" in r:
            counts = (f"{r['steps_measured']:>9}/{r['steps_predicted']:<8}"
                      f"{r['preemptions_measured']:>7}/{r['preemptions_predicted']:<6}"
                      f"{r['compressions_measured']:>8}/{r['compressions_predicted']:<7}")
        unit = "x" if r["engine"] == "speedup" else ""
        lines.append(f"{r['engine']:<9}{r['measured_tok_s']:>10.2f}{unit or ' '}"
                     f"{r['predicted_tok_s']:>10.2f}{unit or ' '}{r['ratio']:>11.3f}  "
                     f"{'ok  ' if r['within_tolerance'] else 'MISS'}{counts}")
    return "\n".join(lines)
