"""LLM(tensor_parallel_size=2) on two GPUs (NCCL, CUDA graphs per rank):
`pytest -m gpu tests/distributed/test_tp_engine_gpu.py` (about 2 minutes on 2 H200s).

A tiny random Qwen3 in fp32 gives the greedy tokens of one GPU with compression on and off
(Triton kernels, NCCL all-reduce inside captured decode graphs); a Qwen3-8B-shaped random
model in bf16 plans more than twice the KV blocks of one GPU (half the weights and half the
KV heads per rank, pool = minimum over ranks) and completes a batch.
"""
import shutil
import time

import pytest
import torch

from tests.engine.tiny_models import random_prompts, tiny_checkpoint
from zipage import LLM, SamplingParams

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(torch.cuda.device_count() < 2,
                                                  reason="needs two CUDA GPUs")]
PROMPTS = random_prompts([5, 40, 70, 12, 300, 33], vocab=384)
GREEDY = SamplingParams(temperature=0.0, max_tokens=96, ignore_eos=True)


@pytest.fixture(scope="module")
def folder():
    path, _ = tiny_checkpoint("qwen3")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def tokens(folder, tp, **options):
    llm = LLM(folder, tensor_parallel_size=tp, device="cuda", dtype="float32", block_size=16,
              kv_cache_tokens=8192, max_num_seqs=32, **options)
    try:
        outs = llm.generate(PROMPTS, GREEDY, use_tqdm=False)
        return [o.outputs[0].token_ids for o in outs], llm.last_stats.num_compressions
    finally:
        llm.shutdown()


@pytest.mark.parametrize("budget", [None, 32], ids=["fullkv", "compressed"])
def test_tiny_fp32_two_gpus_generate_the_tokens_of_one(folder, budget):
    want, c1 = tokens(folder, 1, budget=budget)
    got, c2 = tokens(folder, 2, budget=budget)
    assert got == want
    assert c1 == c2 and (budget is None or c1 > 0)
    got_async, _ = tokens(folder, 2, budget=budget, async_scheduling=True)
    assert got_async == want


def test_qwen3_8b_shape_two_gpus_hold_more_than_twice_the_kv():
    opts = dict(load_format="dummy", gpu_memory_utilization=0.5, max_num_seqs=64,
                max_model_len=4096, block_size=256)
    blocks = {}
    for tp in (1, 2):
        llm = LLM("qwen3-8b", tensor_parallel_size=tp, **opts)
        blocks[tp] = llm.num_kv_blocks
        if tp == 2:
            prompts = random_prompts([128] * 64, vocab=151936)
            t0 = time.perf_counter()
            outs = llm.generate(prompts, SamplingParams(max_tokens=128, ignore_eos=True),
                                use_tqdm=False)
            wall = time.perf_counter() - t0
            assert all(len(o.outputs[0].token_ids) == 128 for o in outs)
            print(f"TP=2 qwen3-8b shape: {64 * 128 / wall:.0f} output tok/s, "
                  f"KV blocks {blocks}")
        llm.shutdown()
        torch.cuda.empty_cache()
    assert blocks[2] > 2 * blocks[1]
