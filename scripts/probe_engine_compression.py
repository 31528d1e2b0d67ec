"""Why does lightning redundancy take ~10x longer inside the engine than standalone?

Runs the bench_compression workload (64 requests, Qwen3-8B shape, budget 2048, paper scoring)
with every redundancy call instrumented: device-synchronised wall time, Triton kernel-cache
size (a growing cache = re-specialisation/compilation), allocator retries (a retry frees the
cache and synchronises), then re-times the captured calls standalone on the engine's own
cache tensors and on a compact copy of the same blocks.
"""
import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import triton.testing  # noqa: E402

from zipage import LLM, SamplingParams  # noqa: E402
from zipage.compression import pipeline  # noqa: E402
from zipage.kernels import key_redundancy as cr  # noqa: E402


def cache_size(fn) -> int:
    caches = getattr(fn, "device_caches", None)
    if caches:
        return sum(len(v[0]) for v in caches.values())
    return len(getattr(fn, "cache", {}).get(0, {}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--num-requests", type=int, default=64)
    ap.add_argument("--output-len", type=int, default=2600)
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    a = ap.parse_args()
    calls = []
    original = pipeline.TRITON_OPS.redundancy

    def traced(k, tables, phys, lightning, tau):
        torch.cuda.synchronize()
        retries0 = torch.cuda.memory_stats().get("num_alloc_retries", 0)
        size0 = cache_size(cr._redundancy_kernel)
        t0 = time.perf_counter()
        out = original(k, tables, phys, lightning, tau)
        torch.cuda.synchronize()
        calls.append(dict(ms=(time.perf_counter() - t0) * 1e3, new_kernels=cache_size(
            cr._redundancy_kernel) - size0, retries=torch.cuda.memory_stats().get(
            "num_alloc_retries", 0) - retries0, B=tables.shape[0], n_max=tables.shape[1],
            args=(k, tables.clone(), phys.clone(), lightning, tau)))
        return out

    pipeline.TRITON_OPS.redundancy = traced
    llm = LLM("qwen3-8b", load_format="dummy", budget=2048, block_size=256,
              max_num_seqs=a.num_requests, max_model_len=128 + a.output_len + 16,
              use_global_score=True, use_pooling=True, redundancy="lightning",
              gpu_memory_utilization=a.gpu_memory_utilization, profile_compression=True)
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(0, 150000, (128,), generator=g).tolist()
               for _ in range(a.num_requests)]
    t0 = time.perf_counter()
    llm.generate(prompts, SamplingParams(temperature=0.6, seed=0, max_tokens=a.output_len,
                                         ignore_eos=True), use_tqdm=False)
    wall = time.perf_counter() - t0
    free, total = torch.cuda.mem_get_info()
    print(f"wall {wall:.1f} s; free GPU memory after run {free / 2**30:.1f} of "
          f"{total / 2**30:.1f} GiB; KV pool {llm.runner.kv_cache.shape}")
    print("call  B  n_max  ms(sync)  new_kernels  alloc_retries")
    for i, c in enumerate(calls):
        print(f"{i:4d} {c['B']:3d} {c['n_max']:5d} {c['ms']:9.2f} {c['new_kernels']:11d} "
              f"{c['retries']:13d}")
    last = max(calls, key=lambda c: c["B"] * c["n_max"])
    k, tables, phys, lightning, tau = last["args"]
    pool_ms = triton.testing.do_bench(lambda: original(k, tables, phys, lightning, tau),
                                      return_mode="median")
    blocks = tables.flatten()
    blocks = blocks[blocks >= 0].long()
    compact = k[:, blocks].contiguous()
    remap = torch.full((k.shape[1],), -1, dtype=torch.int32, device=k.device)
    remap[blocks] = torch.arange(blocks.numel(), dtype=torch.int32, device=k.device)
    compact_tables = torch.where(tables >= 0, remap[tables.clamp_min(0).long()], tables)
    compact_ms = triton.testing.do_bench(
        lambda: original(compact, compact_tables, phys, lightning, tau), return_mode="median")
    same = torch.equal(original(k, tables, phys, lightning, tau),
                       original(compact, compact_tables, phys, lightning, tau))
    print(f"\nre-timed largest call (B {last['B']}, n_max {last['n_max']}, "
          f"{k.shape[0]} layers): engine pool {pool_ms:.2f} ms, compact copy {compact_ms:.2f} ms "
          f"(identical output: {same}); pool strides {k.stride()}, compact {compact.stride()}")


if __name__ == "__main__":
    main()
