"""Compressed PagedAttention inside the engine: the invariants of docs/method.md §15."""
import torch

from tests.engine.compressed_setup import (B, BUDGET, GREEDY, W, C, assert_compressed_rows_within_cap,
                                           expected_compressions, slots)
from tests.engine.tiny_models import random_prompts
from zipage import LLM, SamplingParams
from zipage.worker.compressor import window_positions


def test_identical_to_full_kv_while_shorter_than_budget(folder):
    prompts = random_prompts([3, 20, 9, 1], vocab=384)
    params = SamplingParams(max_tokens=40, **GREEDY)
    full = LLM(folder, device="cpu", block_size=B, kv_cache_tokens=2048)
    zip_ = LLM(folder, device="cpu", block_size=B, kv_cache_tokens=2048, budget=BUDGET)
    outs = zip_.generate(prompts, params, use_tqdm=False)
    assert [o.token_ids for o in outs] == [o.token_ids for o in full.generate(prompts, params, use_tqdm=False)]
    assert all(o.metrics["num_compressions"] == 0 for o in outs)


def test_block_cap_window_and_positions_over_a_long_generation(folder):
    llm = LLM(folder, device="cpu", block_size=B, kv_cache_tokens=4096, budget=BUDGET)
    runner, compressor = llm.runner, llm.runner.compressor
    prompts = random_prompts([5, 30, 70, 150], vocab=384, seed=3)
    seen = {"compressions": 0, "steps": 0}
    original_run, original_launch = compressor.run, runner.launch

    def checked_run(tasks):
        before = []
        for t in tasks:
            assert t.phys_len >= (C + 1) * B and len(t.target_table) == C + 1
            pos = sorted(window_positions(t.num_computed, t.phys_len, W))
            assert pos == list(range(t.phys_len - W, t.phys_len))
            before.append(runner.kv_cache.flatten(2, 3)[:, :, slots(t.old_table, pos)].clone())
        original_run(tasks)
        for t, window_kv in zip(tasks, before):
            after = runner.kv_cache.flatten(2, 3)[:, :, slots(t.target_table, range(C * B - W, C * B))]
            assert torch.equal(after, window_kv), "the observation window must survive in order"
        seen["compressions"] += len(tasks)

    def checked_launch(step, previous=None):
        assert_compressed_rows_within_cap(step)
        for sid, row in step.requests.items():
            if sid in step.compressions:
                assert row.start > row.phys_start  # RoPE positions are logical
        seen["steps"] += 1
        return original_launch(step, previous)

    compressor.run, runner.launch = checked_run, checked_launch
    outs = llm.generate(prompts, SamplingParams(max_tokens=420, **GREEDY), use_tqdm=False)
    assert [len(o.token_ids) for o in outs] == [420] * 4
    assert [o.metrics["num_compressions"] for o in outs] == [expected_compressions(len(p), 420) for p in prompts]
    assert seen["compressions"] == sum(o.metrics["num_compressions"] for o in outs)
    assert [o.metrics["peak_kv_tokens"] for o in outs] == [(C + 1) * B] * 3 + [150]
    assert llm.block_manager.num_free_blocks == llm.num_kv_blocks
    assert sorted(llm.scheduler.free_slots) == list(range(llm.runner.plan.num_query_slots))


def test_shared_prefix_blocks_are_never_overwritten_and_compressed_requests_never_preempted(folder):
    base = random_prompts([48], vocab=384, seed=11)[0]
    prompts = [base + [i, i + 1] for i in range(6)]
    alone = LLM(folder, device="cpu", block_size=B, kv_cache_tokens=4096, budget=BUDGET)
    reference = [o.token_ids for o in alone.generate(prompts[:1], SamplingParams(max_tokens=120, **GREEDY),
                                                     use_tqdm=False)]
    llm = LLM(folder, device="cpu", block_size=B, kv_cache_tokens=B * 20, budget=BUDGET,
              max_num_batched_tokens=64)
    preempted = []
    original = llm.scheduler._preempt

    def record(seq, out):
        assert not seq.is_compressed, "compressed KV is lossy: never recompute it"
        preempted.append(seq.seq_id)
        original(seq, out)

    llm.scheduler._preempt = record
    outs = llm.generate(prompts, SamplingParams(max_tokens=120, **GREEDY), use_tqdm=False)
    assert outs[0].token_ids == reference[0]
    assert llm.block_manager.num_hit_tokens > 0
    assert preempted, "the pool is small enough to force preemption"
    assert llm.block_manager.num_free_blocks == llm.num_kv_blocks


def test_samples_of_a_long_cached_prompt_see_their_own_window_queries(folder):
    """Greedy samples of one prompt longer than the cap compress right after prefill. The
    later samples hit the first one's prefix blocks, but their observation window must still
    hold their own queries of the last W prompt tokens, so all samples compress alike."""
    prompt = random_prompts([100], vocab=384, seed=4)[0]  # cap (C + 1) * b = 80
    llm = LLM(folder, device="cpu", block_size=B, kv_cache_tokens=4096, budget=BUDGET)
    out = llm.generate([prompt], SamplingParams(max_tokens=60, n=3, **GREEDY), use_tqdm=False)[0]
    assert llm.block_manager.num_hit_tokens > 0  # the later samples hit the cache
    assert all(c.metrics["num_compressions"] > 0 for c in out.outputs)
    assert out.outputs[1].token_ids == out.outputs[0].token_ids == out.outputs[2].token_ids


def test_a_step_compressing_many_requests_is_split_to_bound_memory(folder):
    """Same tokens and compressions when each pipeline call may hold only one request."""
    prompts = random_prompts([100, 90, 85, 120, 3, 40], vocab=384, seed=8)  # 4 above the cap
    params = SamplingParams(max_tokens=50, **GREEDY)
    outs, calls = {}, {}
    for tight in (False, True):
        llm = LLM(folder, device="cpu", block_size=B, kv_cache_tokens=4096, budget=BUDGET,
                  profile_compression=True, enable_prefix_caching=False)
        comp = llm.runner.compressor
        if tight:
            comp.max_transient_bytes = 1  # every group holds a single request
        res = llm.generate(prompts, params, use_tqdm=False)
        outs[tight] = [(o.token_ids, o.metrics["num_compressions"]) for o in res]
        calls[tight] = [n for n, _ in comp.round_ms]
    assert outs[True] == outs[False]
    assert set(calls[True]) == {1} and max(calls[False]) > 1
    assert len(calls[True]) == sum(calls[False])
