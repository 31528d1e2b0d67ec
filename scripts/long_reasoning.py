"""Long-generation throughput: Compressed PagedAttention vs our own Full-KV engine, one run.

    python -m scripts.bench long                            # qwen3-8b shape, defaults
    python -m scripts.bench long --kv-cache-tokens 200000   # a smaller KV pool
    python -m scripts.bench long --cpu-smoke                # tiny random Qwen3, CPU

Workload: N random-token prompts (seeded), every request generates exactly `output_len`
tokens (ignore_eos), sampled at the given temperature; random weights with the model's
shapes. The same engine code runs twice, Full KV (budget None) then Zipage (budget B, scored
with --scoring: by default CompressionConfig.full_score(), what engine=zipage runs), same
prompts, same pool size; each engine gets an untimed warm-up (Zipage's compresses, so Triton
compiles outside the timed run). Output tok/s = N x output_len / wall time of `generate`.
Long reasoning is where Full KV runs out of KV memory: its concurrency falls to
pool / context while Zipage holds (C + 1) x b tokens per request.
"""
import time

from scripts import bench_common as bc
from zipage import LLM, SamplingParams


def add_arguments(p):
    bc.add_model_arguments(p)
    bc.add_common_arguments(p)
    p.add_argument("--num-requests", type=int, default=128)
    p.add_argument("--prompt-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=8192)
    p.add_argument("--budget", type=int, default=2048)
    p.add_argument("--block-size", type=int, default=256)
    bc.add_scoring_arguments(p)
    p.add_argument("--temperature", type=float, default=0.6)
    p.add_argument("--kv-cache-tokens", type=int, default=None,
                   help="KV pool size in tokens for both engines (default: all free GPU memory)")
    p.add_argument("--max-num-seqs", type=int, default=None, help="default: num-requests")
    p.add_argument("--engines", nargs="+", default=["full", "zipage"],
                   choices=["full", "zipage"])
    p.add_argument("--async-scheduling", action="store_true",
                   help="both engines schedule step N+1 while step N runs")


def engine_options(a, name: str, base: dict) -> dict:
    opts = dict(base, block_size=a.block_size, max_num_seqs=a.max_num_seqs or a.num_requests,
                max_model_len=a.prompt_len + a.output_len + a.block_size,
                async_scheduling=a.async_scheduling)
    if a.kv_cache_tokens is not None:
        opts["kv_cache_tokens"] = a.kv_cache_tokens
    if name == "zipage":
        opts.update(budget=a.budget, compression=bc.scoring(a))
    return opts


def run_engine(a, model: str, name: str, base: dict, prompts, warm_prompts, device) -> dict:
    opts = engine_options(a, name, base)
    t0 = time.perf_counter()
    llm = LLM(model, **opts)
    load_s = time.perf_counter() - t0
    warm = SamplingParams(temperature=a.temperature, max_tokens=4, ignore_eos=True)
    llm.generate(warm_prompts, warm, use_tqdm=False)
    params = SamplingParams(temperature=a.temperature, seed=a.seed, max_tokens=a.output_len,
                            ignore_eos=True)
    bc.sync(device)
    t0 = time.perf_counter()
    outs = llm.generate(prompts, params, use_tqdm=False)
    bc.sync(device)
    wall = time.perf_counter() - t0
    n_out = sum(len(o.outputs[0].token_ids) for o in outs if o.outputs)
    stats = llm.last_stats.as_dict()
    peak_kv = max(o.outputs[0].metrics["peak_kv_tokens"] for o in outs if o.outputs)
    result = dict(engine=name, options=opts, load_time_s=load_s, wall_time_s=wall,
                  num_output_tokens=n_out, output_tokens_per_s=n_out / wall,
                  max_concurrency=llm.max_concurrency, num_kv_blocks=llm.num_kv_blocks,
                  peak_kv_tokens_per_request=peak_kv, stats=stats,
                  incomplete=sum(1 for o in outs if not o.outputs or
                                 len(o.outputs[0].token_ids) != a.output_len))
    print(f"== {name}: {n_out} tokens in {wall:.1f} s = {n_out / wall:.0f} tok/s; steps "
          f"{stats['num_steps']}, mean running {stats['mean_running']:.1f}, peak running "
          f"{stats['peak_running']}, preemptions {stats['num_preemptions']}, compressions "
          f"{stats['num_compressions']} ({stats['compression_time_s']:.1f} s), peak KV/request "
          f"{peak_kv}", flush=True)
    llm.shutdown()
    bc.free_memory(device)
    return result


def main(a) -> int:
    if a.cpu_smoke:
        a.num_requests, a.prompt_len, a.output_len = 4, 16, 96
        a.budget, a.block_size, a.kv_cache_tokens = 32, 16, 512
    device = bc.device_for(a)
    model, base, tmp = bc.engine_model(a, device)
    workload = {k: getattr(a, k) for k in (
        "model", "num_requests", "prompt_len", "output_len", "budget", "block_size", "scoring",
        "temperature", "seed", "kv_cache_tokens", "async_scheduling", "dtype")}
    env = bc.print_header(device, workload)
    vocab = bc.prompt_vocab(model)
    prompts = bc.random_prompts(a.num_requests, a.prompt_len, vocab, a.seed)
    # warm-up prompts longer than the cap: Zipage compresses them right after prefill
    warm_len = min(a.budget + 2 * a.block_size, a.prompt_len + a.output_len)
    warm_prompts = bc.random_prompts(a.num_requests, warm_len, vocab, a.seed + 1)
    results = [run_engine(a, model, name, base, prompts, warm_prompts, device)
               for name in a.engines]
    by_name = {r["engine"]: r for r in results}
    ratio = None
    if "full" in by_name and "zipage" in by_name:
        ratio = by_name["zipage"]["output_tokens_per_s"] / by_name["full"]["output_tokens_per_s"]
    bc.write_json(a.json, dict(environment=env, workload=workload, results=results, ratio=ratio))
    print(f"\n{'engine':<10}{'tok/s':>9}{'wall s':>9}{'mean run':>10}{'max conc':>10}"
          f"{'preempt':>9}{'compress s':>12}{'peak KV/req':>13}")
    for r in results:
        s = r["stats"]
        print(f"{r['engine']:<10}{r['output_tokens_per_s']:>9.0f}{r['wall_time_s']:>9.1f}"
              f"{s['mean_running']:>10.1f}{r['max_concurrency']:>10}{s['num_preemptions']:>9}"
              f"{s['compression_time_s']:>12.1f}{r['peak_kv_tokens_per_request']:>13}")
    if ratio is not None:
        print(f"ratio zipage / full KV: {ratio:.2f}x")
    if tmp is not None:
        tmp.cleanup()
    return 1 if any(r["incomplete"] for r in results) else 0
