"""Offline throughput: our engine vs Hugging Face transformers `generate`, same workload.

    python -m scripts.bench throughput                 # qwen3-8b shape, 256 x (128 in, 512 out)
    python -m scripts.bench throughput --cpu-smoke     # tiny random Qwen3 on the CPU, end to end
    python -m scripts.bench throughput --skip-hf --json out.json --block-size 16

Workload: N random-token prompts (seeded), fixed prompt length, exactly `output_len` new
tokens per request (ignore_eos; HF: min_new_tokens = max_new_tokens), greedy by default.
Random weights with the model's exact shapes (engine: load_format="dummy"; HF: from_config
built on the GPU); the two models' random weights differ, which does not matter for speed.
Timed region: `generate` only (model load, CUDA-graph capture and one warm-up generate per
engine excluded). Order: copy bandwidth, HF (then freed), our engine (main run, then a
prefill-only run, output_len=1, for the decode roofline estimate). Output tok/s =
requests x output_len / wall time (the vLLM / Nano-vLLM convention).
"""
import time

import torch

from scripts import common as bc
from scripts.arg_types import (count_or_zero, memory_fraction, positive_int,
                               positive_number, temperature)
from scripts.throughput import hf_baseline, roofline
from zipage import LLM, SamplingParams
from zipage.models.presets import SHAPES


def add_arguments(p):
    bc.add_model_arguments(p)
    bc.add_common_arguments(p)
    p.add_argument("--num-requests", type=count_or_zero, default=None,
                   help="default 256 (smoke: 8); 0 = fill the pool: as many requests as run at "
                        "once (llm.max_concurrency; needs --skip-hf)")
    p.add_argument("--prompt-len", type=positive_int, default=None, help="default 128 (smoke: 16)")
    p.add_argument("--output-len", type=positive_int, default=None, help="default 512 (smoke: 16)")
    p.add_argument("--temperature", type=temperature, default=0.0, help="0 = greedy (both engines)")
    p.add_argument("--block-size", type=positive_int, default=None, help="engine default if unset")
    p.add_argument("--budget", type=positive_int, default=None,
                   help="KV budget (tokens), scored with --scoring; default Full KV")
    bc.add_scoring_arguments(p)
    p.add_argument("--max-num-seqs", type=positive_int, default=None)
    p.add_argument("--max-num-batched-tokens", type=positive_int, default=None)
    p.add_argument("--max-model-len", type=positive_int, default=None)
    p.add_argument("--gpu-memory-utilization", type=memory_fraction, default=None)
    p.add_argument("--kv-cache-gib", type=positive_number, default=None,
                   help="KV pool of this many GiB (K, V, scales, global score), whatever "
                        "--kv-cache-dtype: equal memory for auto vs fp8 comparisons")
    p.add_argument("--enforce-eager", action="store_true", help="no CUDA graphs for decode")
    bc.add_async_argument(p, "schedule step n+1 while step n runs on the GPU")
    p.add_argument("--hf-batch-size", type=positive_int, default=None,
                   help="default: all requests at once")
    p.add_argument("--hf-output-len", type=positive_int, default=None,
                   help="HF new tokens per request (default --output-len; shorter favours HF)")
    p.add_argument("--skip-hf", action="store_true")
    p.add_argument("--tqdm", action="store_true", help="engine progress bar in the timed run")


def _defaults(a):
    small = a.cpu_smoke
    if a.num_requests is None:
        a.num_requests = 8 if small else 256
    if a.num_requests == 0 and not a.skip_hf:
        raise SystemExit("--num-requests 0 (fill the pool) needs --skip-hf")
    a.prompt_len = a.prompt_len or (16 if small else 128)
    a.output_len = a.output_len or (16 if small else 512)
    a.hf_output_len = a.hf_output_len or a.output_len
    a.hf_batch_size = a.hf_batch_size or a.num_requests


def _run_hf(a, hf_cfg, checkpoint, dtype, device, prompts, warm_prompts):
    t0 = time.perf_counter()
    hf_model = hf_baseline.build_hf_model(hf_cfg, checkpoint, dtype, device)
    attn = hf_model.config._attn_implementation
    print(f"== HF model built in {time.perf_counter() - t0:.1f} s (attn_implementation={attn})",
          flush=True)
    bs = min(a.hf_batch_size, len(prompts))
    hf_baseline.hf_generate(hf_model, warm_prompts[:bs], 4, bs, a.temperature, a.seed, device)
    t, n_out, tokens = hf_baseline.hf_generate(hf_model, prompts, a.hf_output_len, bs,
                                               a.temperature, a.seed, device)
    assert n_out == len(prompts) * a.hf_output_len, f"HF produced {n_out} tokens"
    print(f"== HF generate: {n_out} tokens in {t:.2f} s = {n_out / t:.0f} tok/s", flush=True)
    del hf_model
    bc.free_memory(device)
    return dict(wall_time_s=t, num_output_tokens=n_out, output_tokens_per_s=n_out / t,
                attn_implementation=attn), tokens


def _engine_options(a, base: dict) -> dict:
    opts = {k: v for k, v in dict(
        block_size=a.block_size, budget=a.budget, max_num_seqs=a.max_num_seqs,
        max_num_batched_tokens=a.max_num_batched_tokens, max_model_len=a.max_model_len,
        gpu_memory_utilization=a.gpu_memory_utilization).items() if v is not None}
    opts.update(base, enforce_eager=a.enforce_eager, async_scheduling=a.async_scheduling)
    if a.budget is not None:
        opts["compression"] = bc.scoring(a)
    if a.cpu_smoke:
        opts.update(block_size=a.block_size or 16, kv_cache_tokens=4096)
    return opts


def _pool_tokens(a, model: str, opts: dict, dtype) -> int:
    """kv_cache_tokens of a --kv-cache-gib pool (zipage/worker/memory.py's block bytes)."""
    from zipage.config import EngineConfig
    from zipage.models.loader import resolve, spec_for
    from zipage.worker.memory import bytes_per_block
    cfg = EngineConfig.from_kwargs(model, **opts)
    spec = spec_for(*resolve(model, cfg.load_format))
    with_score = cfg.budget is not None and cfg.compression.use_global_score
    block = bytes_per_block(spec, cfg.block_size, dtype, with_score, cfg.kv_cache_dtype)
    return int(a.kv_cache_gib * 2**30 // block) * cfg.block_size


def main(a) -> int:
    _defaults(a)
    device = bc.device_for(a)
    dtype = bc.torch_dtype(a.dtype, device)
    model, base_opts, tmp = bc.engine_model(a, device)
    bc.check_engine_options(model, _engine_options(a, base_opts), "zipage" if a.budget else "full")
    checkpoint = None if model in SHAPES else model  # HF loads the same weights from a folder
    hf_cfg = hf_baseline.hf_config_for(model)
    workload = dict(model=a.model if not a.cpu_smoke else "tiny-qwen3 (cpu smoke)",
                    num_requests=a.num_requests, prompt_len=a.prompt_len,
                    output_len=a.output_len, hf_output_len=a.hf_output_len,
                    hf_batch_size=a.hf_batch_size, temperature=a.temperature, seed=a.seed,
                    budget=a.budget, scoring=a.scoring if a.budget else None, ignore_eos=True,
                    dtype=str(dtype).replace("torch.", ""), device=str(device),
                    kv_cache_dtype=a.kv_cache_dtype, kv_cache_gib=a.kv_cache_gib,
                    async_scheduling=a.async_scheduling)
    env = bc.print_header(device, workload)
    V, N, P = hf_cfg.vocab_size, a.num_requests, a.prompt_len
    prompts = bc.random_prompts(N, P, V, a.seed)
    # fresh prompts for every untimed/auxiliary run, so prefix caching cannot reuse anything
    warm_prompts = bc.random_prompts(N, P, V, a.seed + 1)
    prefill_prompts = bc.random_prompts(N, P, V, a.seed + 2)
    result = dict(environment=env, workload=workload)

    copy_bw = roofline.copy_bandwidth(device, 2**30 if device.type == "cuda" else 2**26)
    result["copy_bandwidth_GBps"] = copy_bw / 1e9
    print(f"== device copy bandwidth: {copy_bw / 1e9:.1f} GB/s (read + written)", flush=True)
    hf, hf_tokens = (None, None) if a.skip_hf else _run_hf(a, hf_cfg, checkpoint, dtype, device,
                                                           prompts, warm_prompts)
    result["hf"] = hf

    opts = _engine_options(a, base_opts)
    if a.kv_cache_gib is not None:
        opts["kv_cache_tokens"] = _pool_tokens(a, model, opts, dtype)
    if device.type == "cuda":
        print(f"== GPU memory before the engine: {torch.cuda.memory_allocated() / 2**30:.2f} GiB "
              f"allocated, {torch.cuda.memory_reserved() / 2**30:.2f} GiB reserved", flush=True)
    t0 = time.perf_counter()
    llm = LLM(model, **opts)
    load_s = time.perf_counter() - t0
    cfg = llm.config
    print(f"== engine built in {load_s:.1f} s; options {opts}", flush=True)
    result["engine_options"] = {k: getattr(cfg, k) for k in (
        "block_size", "budget", "max_num_seqs", "max_num_batched_tokens", "max_model_len",
        "gpu_memory_utilization", "enforce_eager", "enable_prefix_caching", "kv_cache_tokens",
        "kv_cache_dtype", "async_scheduling")}
    result["engine_options"]["max_model_len"] = llm.max_model_len
    result["engine_options"]["num_kv_blocks"] = llm.num_kv_blocks
    result["engine_options"]["fp8_key_rotation"] = cfg.rotates_keys
    result["engine_options"]["fp8_decode"] = cfg.fp8_decode
    if N == 0:  # fill the pool: every request runs at once (fresh prompts, as above)
        N = workload["num_requests"] = llm.max_concurrency
        prompts, warm_prompts, prefill_prompts = (bc.random_prompts(N, P, V, a.seed + i)
                                                  for i in range(3))
        print(f"== filling the pool: {N} requests (llm.max_concurrency)", flush=True)
    def run(batch, out_len, tqdm=False):
        sp = SamplingParams(temperature=a.temperature, max_tokens=out_len, ignore_eos=True)
        bc.sync(device)
        start = time.perf_counter()
        outs = llm.generate(batch, sp, use_tqdm=tqdm)
        bc.sync(device)
        return time.perf_counter() - start, outs, llm.last_stats.as_dict()

    run(warm_prompts, min(8, a.output_len))  # warm-up (fresh prompts): Triton JIT, allocator
    t_full, outs, stats = run(prompts, a.output_len, a.tqdm)
    toks = [o.outputs[0].token_ids if o.outputs else [] for o in outs]
    bad = [o.request_id for o, t in zip(outs, toks) if o.error or len(t) != a.output_len]
    if bad:
        print(f"!! {len(bad)} requests did not produce {a.output_len} tokens: {bad[:8]} "
              f"(first error: {next((o.error for o in outs if o.error), None)})")
    n_out = sum(map(len, toks))
    ours = dict(wall_time_s=t_full, num_output_tokens=n_out, output_tokens_per_s=n_out / t_full,
                load_time_s=load_s, stats=stats, bad_requests=len(bad))
    t_pf, _, stats_pf = run(prefill_prompts, 1)
    ours.update(prefill_only_time_s=t_pf, prefill_only_stats=stats_pf)
    result["ours"] = ours
    if hf is not None and checkpoint is not None and a.temperature == 0 \
            and a.hf_output_len == a.output_len:
        same = sum(t == h for t, h in zip(toks, hf_tokens))
        print(f"== same weights: greedy tokens identical to HF for {same}/{N} requests")
        result["identical_to_hf"] = same

    spec = llm.spec
    from zipage.sim.shapes import kv_bytes_per_token
    kv_per_token = kv_bytes_per_token(spec, llm.dtype, cfg.kv_cache_dtype)
    roof = None  # tensor parallel: the weights live in the rank processes (no roofline)
    if hasattr(llm.runner, "model"):
        weight_bytes, weight_note = roofline.decode_weight_bytes(llm.runner.model)
        mean_ctx = roofline.mean_decode_context(P, a.output_len, cfg.budget, cfg.block_size)
        roof = roofline.roofline(copy_bw, weight_bytes, kv_per_token, t_full,
                                 stats["num_steps"], t_pf, stats_pf["num_steps"], N,
                                 a.output_len, mean_ctx)
    result["roofline"] = roof
    if hf is not None:
        result["ratio"] = ours["output_tokens_per_s"] / hf["output_tokens_per_s"]
    bc.write_json(a.json, result)

    print()
    if roof is None:
        print("decode roofline: " + ("not estimated with tensor parallelism"
                                     if not hasattr(llm.runner, "model")
                                     else "not enough decode steps to estimate"))
    else:
        print(roofline.describe_roofline(roof, kv_per_token, weight_note, t_full, t_pf,
                                         stats_pf["num_steps"], N, a.output_len))
    if stats["num_preemptions"]:
        print(f"!! {stats['num_preemptions']} preemptions: the decode estimate above is rough")
    print("engine stats (llm.last_stats): " + ", ".join(
        f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in stats.items()))
    print(f"\n{'':<22}{'output tok/s':>14}{'wall s':>10}{'out tokens':>12}")
    print(f"{'zipage (ours)':<22}{ours['output_tokens_per_s']:>14.0f}{t_full:>10.2f}{n_out:>12}")
    if hf is not None:
        print(f"{'HF generate':<22}{hf['output_tokens_per_s']:>14.0f}{hf['wall_time_s']:>10.2f}"
              f"{hf['num_output_tokens']:>12}")
        note = "" if a.hf_output_len == a.output_len else f" (HF ran {a.hf_output_len} tokens)"
        print(f"{'ratio ours / HF':<22}{result['ratio']:>13.2f}x{note}")
    if roof is not None:
        print(f"{'decode bandwidth':<22}{100 * roof['fraction_of_copy_bw']:>13.1f}% of "
              f"{roof['copy_bandwidth_GBps']:.0f} GB/s copy (estimate)")
    if tmp is not None:
        tmp.cleanup()
    llm.shutdown()  # callers may build another engine in this process (bench fp8)
    a.result = result
    return 1 if bad else 0
