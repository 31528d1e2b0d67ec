"""Asynchronous scheduling on CUDA gives the same greedy tokens as synchronous scheduling
with compression on (Triton kernels, CUDA graphs, bf16), and compression is timed with
events rather than a device sync per step.

    pytest -m gpu tests/gpu/test_engine_async.py -s     # -s prints the timings
"""
import gc
import time

import torch

from tests.engine.tiny_models import random_prompts
from zipage import LLM, SamplingParams


def _run(async_scheduling: bool, prompts, params):
    llm = LLM("qwen3-1.7b", load_format="dummy", block_size=16, budget=128, max_num_seqs=64,
              max_model_len=4096, gpu_memory_utilization=0.5, async_scheduling=async_scheduling,
              use_global_score=True, use_pooling=True, redundancy="lightning")
    llm.generate(prompts[:4], SamplingParams(max_tokens=4, ignore_eos=True), use_tqdm=False)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    outs = llm.generate(prompts, params, use_tqdm=False)
    wall = time.perf_counter() - t0
    stats = llm.last_stats
    free = llm.block_manager.num_free_blocks == llm.num_kv_blocks
    result = ([(o.token_ids, o.metrics["num_compressions"], o.metrics["peak_kv_tokens"]) for o in outs],
              stats, wall, free)
    llm.shutdown()
    del llm
    gc.collect()
    torch.cuda.empty_cache()
    return result


def test_async_scheduling_matches_sync_with_compression_on_cuda():
    prompts = random_prompts([20 + 11 * i for i in range(48)], vocab=151936, seed=6)
    params = SamplingParams(temperature=0, max_tokens=400, ignore_eos=True)
    runs = {mode: _run(mode, prompts, params) for mode in (False, True)}
    for mode, (_, stats, wall, free) in runs.items():
        print(f"async_scheduling={mode}: {wall:.2f} s, {stats.output_tokens_per_s:.0f} tok/s, "
              f"{stats.num_compressions} compressions in {stats.compression_time_s:.3f} s "
              f"({stats.compression_time_s / wall:.1%} of the run), {stats.num_steps} steps")
        assert free, "KV blocks leaked"
        assert stats.num_compressions > 0 and 0 < stats.compression_time_s < wall
    assert runs[True][0] == runs[False][0]
