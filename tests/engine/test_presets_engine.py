"""Engine invariants for every comparison preset (docs/method.md §14, §15): block cap, the
forced recent tokens and sinks kept in order, logical RoPE positions, every block and query
slot back at the end; SnapKV compresses a long prompt once and then grows like Full KV."""
import pytest
import torch

from tests.engine.compressed_setup import (B, BUDGET, GREEDY, C, assert_compressed_rows_within_cap,
                                           expected_compressions, slots)
from tests.engine.tiny_models import random_prompts
from zipage import LLM, SamplingParams
from zipage.compression.presets import preset

DECODE_PRESETS = ["rkv", "gkv", "snapkv_decode", "streaming_llm", "h2o"]


def engine(folder, name, **options):
    return LLM(folder, device="cpu", block_size=B, budget=BUDGET, compression=preset(name),
               **{"kv_cache_tokens": 4096, **options})


@pytest.mark.parametrize("name", DECODE_PRESETS)
def test_decode_presets_keep_cap_recent_tokens_sinks_and_positions(folder, name):
    llm = engine(folder, name)
    cfg = llm.config.compression
    recent, sinks = cfg.forced_recent(BUDGET), cfg.num_sink_tokens
    runner, compressor = llm.runner, llm.runner.compressor
    seen = {"compressions": 0}
    original_run, original_launch = compressor.run, runner.launch

    def checked_run(tasks):
        before = []
        for t in tasks:
            assert t.phys_len >= (C + 1) * B and len(t.target_table) == C + 1
            forced = list(range(sinks)) + list(range(t.phys_len - recent, t.phys_len))
            before.append(runner.kv_cache.flatten(2, 3)[:, :, slots(t.old_table, forced)].clone())
        original_run(tasks)
        for t, forced_kv in zip(tasks, before):
            kept = list(range(sinks)) + list(range(C * B - recent, C * B))
            after = runner.kv_cache.flatten(2, 3)[:, :, slots(t.target_table, kept)]
            assert torch.equal(after, forced_kv), "sinks and recent tokens survive, in order"
        seen["compressions"] += len(tasks)

    def checked_launch(step, previous=None):
        assert_compressed_rows_within_cap(step)
        return original_launch(step, previous)

    compressor.run, runner.launch = checked_run, checked_launch
    prompts = random_prompts([5, 30, 100], vocab=384, seed=5)
    outs = llm.generate(prompts, SamplingParams(max_tokens=150, **GREEDY), use_tqdm=False)
    assert [len(o.token_ids) for o in outs] == [150] * 3
    assert [o.metrics["num_compressions"] for o in outs] == [
        expected_compressions(len(p), 150) for p in prompts]
    assert seen["compressions"] == sum(o.metrics["num_compressions"] for o in outs) > 0
    assert [o.metrics["peak_kv_tokens"] for o in outs] == [(C + 1) * B] * 2 + [100]
    assert llm.block_manager.num_free_blocks == llm.num_kv_blocks
    assert sorted(llm.scheduler.free_slots) == list(range(llm.runner.plan.num_query_slots))


def test_snapkv_compresses_a_long_prompt_once_then_grows_like_full_kv(folder):
    short = random_prompts([5, 40], vocab=384, seed=6)
    long_prompt = random_prompts([150], vocab=384, seed=7)[0]
    params = SamplingParams(max_tokens=120, **GREEDY)
    full = LLM(folder, device="cpu", block_size=B, kv_cache_tokens=4096)
    llm = engine(folder, "snapkv")
    tasks = []
    original_run = llm.runner.compressor.run

    def recorded(ts):
        tasks.extend(ts)
        original_run(ts)

    llm.runner.compressor.run = recorded
    outs = llm.generate(short + [long_prompt], params, use_tqdm=False)
    # within the budget: never compressed, identical to Full KV
    assert [o.token_ids for o in outs[:2]] == [o.token_ids for o in full.generate(
        short, params, use_tqdm=False)]
    assert [o.metrics["num_compressions"] for o in outs] == [0, 0, 1]
    (task,) = tasks
    assert task.phys_len == 150 and task.num_computed == 150  # right after prefill
    # then nothing is evicted: the request holds the budget plus its whole output
    assert outs[2].metrics["peak_kv_tokens"] == BUDGET + 120 - 1
    assert llm.block_manager.num_free_blocks == llm.num_kv_blocks


def test_snapkv_requests_that_outgrow_the_pool_are_preempted_not_stalled(folder):
    prompts = random_prompts([100, 100, 100], vocab=384, seed=8)
    llm = engine(folder, "snapkv", kv_cache_tokens=B * 24, max_num_batched_tokens=128)
    outs = llm.generate(prompts, SamplingParams(max_tokens=200, **GREEDY), use_tqdm=False)
    assert [len(o.token_ids) for o in outs] == [200] * 3
    assert llm.scheduler.num_preemptions > 0
    assert llm.block_manager.num_free_blocks == llm.num_kv_blocks
