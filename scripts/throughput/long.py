"""Long-generation throughput: Compressed PagedAttention vs our own Full-KV engine, one run.

    python -m scripts.bench long                            # qwen3-8b shape, defaults
    python -m scripts.bench long --kv-cache-tokens 200000   # a smaller KV pool
    python -m scripts.bench long --cpu-smoke                # tiny random Qwen3, CPU
    python -m scripts.bench long ... --json R.json --trace T.json.gz   # report + step trace

Workload: N random-token prompts (seeded), every request generates exactly `output_len`
tokens (ignore_eos), or its own length drawn from a capped lognormal (`--mean-output-len`),
sampled at the given temperature; random weights with the model's
shapes. The same engine code runs twice, Full KV (budget None) then Zipage (budget B, scored
with --scoring: by default CompressionConfig(), what engine=zipage runs), same
prompts, same pool size; each engine gets an untimed warm-up (Zipage's compresses, so Triton
compiles outside the timed run). Output tok/s = N x output_len / wall time of `generate`.
Long reasoning is where Full KV runs out of KV memory: its concurrency falls to
pool / context while Zipage holds (C + 1) x b tokens per request.

--json writes the throughput report of zipage/sim/report.py (source "measured"; the raw
results under "results"), the format `bench simulate --validate` predicts. --trace records
every step of the timed runs (features, host timings, CUDA-event device time; one pass over
the step's rows per step) for `bench calibrate --from-trace` and `bench simulate --validate`.
"""
import dataclasses
import time
from collections import Counter

from scripts import common as bc
from scripts.arg_types import positive_int, positive_number, temperature
from scripts.throughput.energy import EnergyCounter, energy_since
from scripts.throughput.long_workload import DEFAULT_SIZES, draw_lengths, resolve_sizes
from scripts.throughput.roofline import copy_bandwidth, mean_decode_context
from zipage import LLM, SamplingParams
from zipage.compression.presets import COMPARISON, preset
from zipage.sim import report as rp
from zipage.sim.shapes import itemsize, kv_bytes_per_token, parameter_counts
from zipage.sim.trace import COLUMNS, StepTracer, write_traces


def add_arguments(p):
    bc.add_model_arguments(p)
    bc.add_common_arguments(p)
    # sizes default to None so that --cpu-smoke can tell a given size from a default one
    p.add_argument("--num-requests", type=positive_int,
                   help=f"default {DEFAULT_SIZES['num_requests']}")
    p.add_argument("--prompt-len", type=positive_int,
                   help=f"default {DEFAULT_SIZES['prompt_len']}")
    p.add_argument("--output-len", type=positive_int,
                   help="tokens every request generates; with --mean-output-len, the cap "
                        f"(default {DEFAULT_SIZES['output_len']})")
    p.add_argument("--mean-output-len", type=positive_number, default=None,
                   help="draw each request's length from a lognormal with this mean, capped at "
                        "--output-len (zipage/sim/lengths.py; seeded by --seed): staggered "
                        "finishes, as in a sampled run")
    p.add_argument("--sigma", type=positive_number, default=0.6,
                   help="lognormal sigma of the lengths")
    p.add_argument("--budget", type=positive_int, help=f"default {DEFAULT_SIZES['budget']}")
    p.add_argument("--block-size", type=positive_int,
                   help=f"default {DEFAULT_SIZES['block_size']}")
    bc.add_scoring_arguments(p)
    p.add_argument("--temperature", type=temperature, default=0.6)
    p.add_argument("--kv-cache-tokens", type=positive_int, default=None,
                   help="KV pool size in tokens for both engines (default: all free GPU memory)")
    p.add_argument("--max-num-seqs", type=positive_int, default=None, help="default: num-requests")
    p.add_argument("--engines", nargs="+", default=["full", "zipage"],
                   choices=["full", "zipage", *COMPARISON],
                   help="full, zipage (scored by --scoring) and the comparison presets "
                        "(docs/method.md §14), each at --budget; presets print their tok/s "
                        "relative to zipage's when both ran")
    bc.add_async_argument(p, "both engines schedule step N+1 while step N runs")
    p.add_argument("--trace", metavar="PATH",
                   help="write per-step traces of the timed runs (JSON; gzip if PATH ends .gz)")


def engine_options(a, name: str, base: dict) -> dict:
    opts = dict(base, block_size=a.block_size, max_num_seqs=a.max_num_seqs or a.num_requests,
                max_model_len=a.prompt_len + a.output_len + a.block_size,
                async_scheduling=a.async_scheduling)
    if a.kv_cache_tokens is not None:
        opts["kv_cache_tokens"] = a.kv_cache_tokens
    if name == "zipage":
        opts.update(budget=a.budget, compression=dataclasses.asdict(bc.scoring(a)))
    elif name != "full":  # a comparison preset, with its own window
        opts.update(budget=a.budget, compression=dataclasses.asdict(preset(name)))
    return opts


def run_engine(a, model: str, name: str, base: dict, prompts, warm_prompts, device,
               traces: dict) -> dict:
    opts = engine_options(a, name, base)
    t0 = time.perf_counter()
    llm = LLM(model, **opts)
    load_s = time.perf_counter() - t0
    warm = SamplingParams(temperature=a.temperature, max_tokens=4, ignore_eos=True)
    llm.generate(warm_prompts, warm, use_tqdm=False)
    params = [SamplingParams(temperature=a.temperature, seed=a.seed, max_tokens=n,
                             ignore_eos=True) for n in a.lengths]
    tracer = StepTracer.attach(llm) if a.trace else None
    meter = EnergyCounter() if device.type == "cuda" else None  # NVML device 0: the GPU timed
    bc.sync(device)
    start_mj = meter.millijoules() if meter is not None and meter.available else None
    t0 = time.perf_counter()
    outs = llm.generate(prompts, params, use_tqdm=False)
    bc.sync(device)
    wall = time.perf_counter() - t0
    if tracer is not None:
        StepTracer.detach(llm)
        traces[name] = tracer.table(opts)
    n_out = sum(len(o.outputs[0].token_ids) for o in outs if o.outputs)
    stats = llm.last_stats.as_dict()
    energy = energy_since(meter, start_mj, wall, n_out)
    peak_kv = max(o.outputs[0].metrics["peak_kv_tokens"] for o in outs if o.outputs)
    result = dict(engine=name, options=opts, load_time_s=load_s, wall_time_s=wall,
                  num_output_tokens=n_out, output_tokens_per_s=n_out / wall,
                  max_concurrency=llm.max_concurrency, num_kv_blocks=llm.num_kv_blocks,
                  fp8_key_rotation=llm.config.rotates_keys, fp8_decode=llm.config.fp8_decode,
                  peak_kv_tokens_per_request=peak_kv, stats=stats, energy=energy,
                  incomplete=sum(1 for o, n in zip(outs, a.lengths) if not o.outputs or
                                 len(o.outputs[0].token_ids) != n),
                  model_shape=dataclasses.asdict(llm.spec),
                  bytes_read=bytes_read(a, llm, stats, tracer), roofline_basis=(
                      "trace" if tracer else "analytic: no preemption recompute counted"))
    print(f"== {name}: {n_out} tokens in {wall:.1f} s = {n_out / wall:.0f} tok/s; steps "
          f"{stats['num_steps']}, mean running {stats['mean_running']:.1f}, peak running "
          f"{stats['peak_running']}, preemptions {stats['num_preemptions']}, compressions "
          f"{stats['num_compressions']} ({stats['compression_time_s']:.1f} s), peak KV/request "
          f"{peak_kv}", flush=True)
    if energy is not None and n_out and wall > 0:
        print(f"   energy {energy['joules']:.0f} J at {energy['watts']:.0f} W mean: "
              f"{energy['mj_per_output_token']:.1f} mJ per output token", flush=True)
    llm.shutdown()
    bc.free_memory(device)
    return result


def mj_per_token(result: dict) -> str:
    """The run's energy per output token for the summary table, '-' without a counter."""
    per_token = (result.get("energy") or {}).get("mj_per_output_token")
    return "-" if per_token is None else f"{per_token:.1f}"


def bytes_read(a, llm, stats: dict, tracer: StepTracer | None) -> float:
    """Bytes the run's steps read: decode weights per step plus the KV attended (every step's
    contexts from the trace; else each request's decode contexts, without recomputes)."""
    spec, dtype = llm.spec, llm.dtype
    weights = parameter_counts(spec)[1] * itemsize(dtype)
    if tracer is not None:
        i, j = COLUMNS.index("kv_read_tokens"), COLUMNS.index("prefill_context_tokens")
        kv = sum(r[i] + r[j] for r in tracer.rows)
    else:
        capped = llm.config.budget is not None and not llm.config.compression.compress_prompt_only
        budget = a.budget if capped else None
        kv = sum(count * (n - 1) * mean_decode_context(a.prompt_len, n, budget, a.block_size)
                 for n, count in Counter(a.lengths).items())
    return stats["num_steps"] * weights + kv * kv_bytes_per_token(spec, dtype, a.kv_cache_dtype)


def report(a, env: dict, workload: dict, results: list[dict], copy_bw: float | None) -> dict:
    engines, presets = {}, {}
    for r in results:
        s = r["stats"]
        name = {"full": "fullkv"}.get(r["engine"], r["engine"])
        (engines if name in ("fullkv", "zipage") else presets)[name] = rp.engine_entry(
            output_tokens=r["num_output_tokens"], wall_time_s=r["wall_time_s"],
            steps=s["num_steps"], mean_running=s["mean_running"],
            preemptions=s["num_preemptions"], compressions=s["num_compressions"],
            num_kv_blocks=r["num_kv_blocks"], block_size=a.block_size, options=r["options"],
            bytes_read=r["bytes_read"], copy_bandwidth_Bps=copy_bw,
            roofline_basis=r["roofline_basis"], compression_time_s=s["compression_time_s"],
            peak_running=s["peak_running"])
    return rp.build_report(
        "measured", model="tiny-qwen3 (cpu-smoke)" if a.cpu_smoke else a.model,
        model_shape=results[0]["model_shape"], gpu=env.get("gpu"), output_len=a.output_len_report,
        num_requests=a.num_requests, prompt_len=a.prompt_len, budget=a.budget,
        block_size=a.block_size, async_scheduling=a.async_scheduling, engines=engines,
        temperature=a.temperature, seed=a.seed, presets=presets,
        copy_bandwidth_GBps=copy_bw / 1e9 if copy_bw else None, environment=env,
        workload=workload, results=results)


def main(a) -> int:
    resolve_sizes(a)
    device = bc.device_for(a)
    model, base, tmp = bc.engine_model(a, device)
    for name in a.engines:
        bc.check_engine_options(model, engine_options(a, name, base), name)
    a.lengths, a.output_len_report = draw_lengths(a)
    workload = {k: getattr(a, k) for k in (
        "model", "num_requests", "prompt_len", "output_len", "mean_output_len", "sigma",
        "budget", "block_size", "scoring", "temperature", "seed", "kv_cache_tokens",
        "async_scheduling", "dtype", "kv_cache_dtype", "fp8_decode")}
    env = bc.print_header(device, workload)
    if a.mean_output_len is not None:
        print(f"  drawn lengths: mean {a.output_len_report['drawn_mean']:.0f}, min "
              f"{min(a.lengths)}, max {max(a.lengths)}, {a.lengths.count(a.output_len)} at the cap")
    vocab = bc.prompt_vocab(model)
    prompts = bc.random_prompts(a.num_requests, a.prompt_len, vocab, a.seed)
    # warm-up prompts longer than the cap: Zipage compresses them right after prefill
    warm_len = min(a.budget + 2 * a.block_size, a.prompt_len + a.output_len)
    warm_prompts = bc.random_prompts(a.num_requests, warm_len, vocab, a.seed + 1)
    copy_bw = copy_bandwidth(device) if device.type == "cuda" else None
    traces = {}
    results = [run_engine(a, model, name, base, prompts, warm_prompts, device, traces)
               for name in a.engines]
    out = report(a, env, workload, results, copy_bw)
    ratio = out["speedup"]
    bc.write_json(a.json, dict(out, ratio=ratio))
    if a.trace:
        write_traces(a.trace, {"fullkv" if k == "full" else k: v for k, v in traces.items()})
    print(f"\n{'engine':<14}{'tok/s':>9}{'vs zipage':>10}{'wall s':>9}{'mean run':>10}"
          f"{'max conc':>10}{'preempt':>9}{'compress s':>12}{'peak KV/req':>13}{'roofline':>10}"
          f"{'mJ/tok':>8}")
    zipage_tps = next((r["output_tokens_per_s"] for r in results if r["engine"] == "zipage"),
                      None)
    for r in results:
        s = r["stats"]
        name = {"full": "fullkv"}.get(r["engine"], r["engine"])
        roof = (out[name] if name in ("fullkv", "zipage") else out["presets"][name])[
            "roofline_fraction"]
        rel = f"{r['output_tokens_per_s'] / zipage_tps:.2f}x" if zipage_tps else "-"
        print(f"{r['engine']:<14}{r['output_tokens_per_s']:>9.0f}{rel:>10}{r['wall_time_s']:>9.1f}"
              f"{s['mean_running']:>10.1f}{r['max_concurrency']:>10}{s['num_preemptions']:>9}"
              f"{s['compression_time_s']:>12.1f}{r['peak_kv_tokens_per_request']:>13}"
              f"{'-' if roof is None else f'{roof:.1%}':>10}{mj_per_token(r):>8}")
    if ratio is not None:
        print(f"ratio zipage / full KV: {ratio:.2f}x")
    if tmp is not None:
        tmp.cleanup()
    return 1 if any(r["incomplete"] for r in results) else 0
