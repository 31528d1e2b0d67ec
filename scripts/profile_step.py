"""Where a Zipage decode step goes on the GPU machine: host phases vs GPU kernel time.

Workload of the long-reasoning benchmark (192 requests, Qwen3-8B shape, budget 256, block 32,
temperature 0.6, CUDA graphs). Prints wall time per step, GPU kernel time per step (is the GPU
idle waiting for the host?), host time per runner phase, and the top GPU kernels.
"""
import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile, record_function  # noqa: E402

from zipage import LLM, SamplingParams  # noqa: E402


def timed(obj, name: str):
    fn = getattr(obj, name)

    def wrapper(*args, **kwargs):
        with record_function(f"phase::{name}"):
            return fn(*args, **kwargs)

    setattr(obj, name, wrapper)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--num-requests", type=int, default=192)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--temperature", type=float, default=0.6)
    ap.add_argument("--budget", type=int, default=256)
    ap.add_argument("--block-size", type=int, default=32)
    a = ap.parse_args()
    llm = LLM("qwen3-8b", load_format="dummy", budget=a.budget, block_size=a.block_size,
              max_num_seqs=a.num_requests, kv_cache_tokens=200000, max_model_len=8192,
              use_global_score=True, use_pooling=True, redundancy="lightning")
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(0, 150000, (128,), generator=g).tolist()
               for _ in range(a.num_requests)]
    warm = [torch.randint(0, 150000, (a.budget + 2 * a.block_size,), generator=g).tolist()
            for _ in range(a.num_requests)]
    llm.generate(warm, SamplingParams(max_tokens=4, ignore_eos=True), use_tqdm=False)
    r = llm.runner
    for name in ("_forward", "_sample"):
        timed(r, name)
    timed(r.compressor, "run")
    timed(llm.scheduler, "schedule")
    timed(llm.scheduler, "update_from_output")
    import zipage.worker.model_runner as mr
    timed(mr, "build_batch")  # the module-level name the runner calls
    params = SamplingParams(temperature=a.temperature, seed=0, max_tokens=a.steps,
                            ignore_eos=True)
    llm.generate(prompts, params, use_tqdm=False)  # same shapes once, outside the profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        llm.generate(prompts, params, use_tqdm=False)
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
    st = llm.last_stats
    steps = st.num_steps
    events = prof.key_averages()
    kernel_us = sum(e.self_device_time_total for e in events
                    if e.device_type == torch.autograd.DeviceType.CUDA)
    print(f"\nsteps {steps}, wall {wall * 1e3 / steps:.2f} ms/step (profiler on), GPU kernel time "
          f"{kernel_us / 1e3 / steps:.2f} ms/step ({100 * kernel_us / 1e6 / wall:.0f}% busy), "
          f"compressions {st.num_compressions}")
    print("host phases (CPU ms/step, inclusive):")
    for e in sorted(events, key=lambda e: -e.cpu_time_total):
        if e.key.startswith("phase::"):
            print(f"  {e.key[7:]:<14}{e.cpu_time_total / 1e3 / steps:8.2f}  ({e.count} calls)")
    print(events.table(sort_by="self_cuda_time_total", row_limit=20, max_name_column_width=70))


if __name__ == "__main__":
    main()
