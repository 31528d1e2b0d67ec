"""Data-parallel scaling: one engine vs N engine replicas (one per GPU group) on the same
workload, as `engine.data_parallel_size=N` runs the harness.

    python -m scripts.bench dp --replicas 2                        # qwen3-8b shape, 2 GPUs
    python -m scripts.bench dp --replicas 2 --tensor-parallel-size 2   # 4 GPUs, TP=2 each
    python -m scripts.bench dp --cpu-smoke                         # tiny model on the CPU (flow)

Workload: N random-token prompts, exactly `output_len` new tokens each (ignore_eos). First
one replica (GPUs 0..T-1) runs all N; then R replicas each run every R-th prompt. Each
replica is its own spawned process (CUDA_VISIBLE_DEVICES set before it imports torch),
loads its engine, warms up, and waits at a barrier, so the timed span (first start to last
end) excludes loading. Output tok/s = tokens / span; the ratio is R replicas over one.
"""
import os
import time

from scripts import common as bc
from scripts.arg_types import positive_int


def add_arguments(p):
    bc.add_model_arguments(p)
    bc.add_common_arguments(p)
    p.add_argument("--replicas", type=positive_int, default=2)
    p.add_argument("--num-requests", type=positive_int, default=None, help="default 512 (smoke: 8)")
    p.add_argument("--prompt-len", type=positive_int, default=None, help="default 128 (smoke: 16)")
    p.add_argument("--output-len", type=positive_int, default=None, help="default 1024 (smoke: 16)")
    p.add_argument("--budget", type=positive_int, default=None, help="KV budget; default Full KV")
    p.add_argument("--block-size", type=positive_int, default=None)


def _replica(rank, opts, model, prompts, output_len, barrier, results):
    import torch

    from zipage import LLM, SamplingParams
    llm = LLM(model, **opts)
    warm = SamplingParams(max_tokens=4, ignore_eos=True)
    llm.generate(prompts[: min(8, len(prompts))], warm, use_tqdm=False)
    barrier.wait()
    start = time.perf_counter()  # one clock for every process of the host
    outs = llm.generate(prompts, SamplingParams(max_tokens=output_len, ignore_eos=True),
                        use_tqdm=False)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    end = time.perf_counter()
    results.put((rank, start, end, sum(len(o.outputs[0].token_ids) for o in outs if o.outputs)))
    llm.shutdown()


def _launch(size, gpus_per_replica, device, opts, model, prompts, output_len) -> dict:
    import multiprocessing as mp

    from tasks.replicas import gpu_groups
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(size), ctx.Queue()
    groups = gpu_groups(size, gpus_per_replica, device)
    procs = []
    for r in range(size):
        saved = os.environ.get("CUDA_VISIBLE_DEVICES")
        if groups[r] is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = groups[r]
        p = ctx.Process(target=_replica, args=(r, opts, model, prompts[r::size], output_len,
                                               barrier, results))
        p.start()
        procs.append(p)
        if saved is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = saved
    got = [results.get(timeout=3600) for _ in range(size)]
    for p in procs:
        p.join()
    span = max(g[2] for g in got) - min(g[1] for g in got)
    tokens = sum(g[3] for g in got)
    return {"replicas": size, "gpus": groups, "span_s": span, "output_tokens": tokens,
            "output_tokens_per_s": tokens / span}


def main(a) -> int:
    import torch
    device = torch.device("cuda" if torch.cuda.is_available() and not a.cpu_smoke else "cpu")
    small = a.cpu_smoke
    n = a.num_requests or (8 if small else 512)
    plen = a.prompt_len or (16 if small else 128)
    olen = a.output_len or (16 if small else 1024)
    model, opts, tmp = bc.engine_model(a, device)
    if a.block_size:
        opts["block_size"] = a.block_size
    opts.update(budget=a.budget, max_num_seqs=max(1, n), max_model_len=plen + olen + 256)
    if device.type == "cpu":
        opts.update(kv_cache_tokens=4096, block_size=16)
    from zipage.models.loader import load_hf_config, resolve
    vocab = load_hf_config(*resolve(model, opts.get("load_format", "auto"))).vocab_size
    prompts = bc.random_prompts(n, plen, vocab, a.seed)
    workload = dict(model=a.model if not small else "tiny-qwen3", requests=n, prompt_len=plen,
                    output_len=olen, replicas=a.replicas,
                    tensor_parallel_size=a.tensor_parallel_size,
                    budget=a.budget, options=opts)
    env = bc.print_header(device, workload)
    tp = a.tensor_parallel_size
    one = _launch(1, tp, device.type, opts, model, prompts, olen)
    print(f"== 1 replica: {one['output_tokens_per_s']:.0f} tok/s over {one['span_s']:.1f} s",
          flush=True)
    many = _launch(a.replicas, tp, device.type, opts, model, prompts, olen)
    ratio = many["output_tokens_per_s"] / one["output_tokens_per_s"]
    bc.write_json(a.json, dict(environment=env, workload=workload, one=one, many=many,
                               ratio=ratio))
    print(f"\n{'':<16}{'output tok/s':>14}{'span s':>10}{'out tokens':>12}")
    for label, r in (("1 replica", one), (f"{a.replicas} replicas", many)):
        print(f"{label:<16}{r['output_tokens_per_s']:>14.0f}{r['span_s']:>10.2f}"
              f"{r['output_tokens']:>12}")
    print(f"{'ratio':<16}{ratio:>13.2f}x (ideal {a.replicas}x)")
    if tmp is not None:
        tmp.cleanup()
    return 0
