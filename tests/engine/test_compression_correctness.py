"""Compression sees exactly what the method prescribes, whatever the scheduling does
(docs/method.md: compression trigger, observation window, prefix caching).

Issue 10 items 1-3: a compression uses its own W queries whatever the chunking (1), every
ring entry a compression reads is the post-RoPE query of its logical position (2), and a
shared prefix block whose reference count fell to 1 is rewritten in place while siblings
keep their copies (3).
"""
import pytest
import torch

from tests.engine.compressed_setup import B, BUDGET, GREEDY, W
from tests.engine.tiny_models import random_prompts
from zipage import LLM, SamplingParams


def engine(folder, **options):
    return LLM(folder, device="cpu", block_size=B, budget=BUDGET, **{"kv_cache_tokens": 4096, **options})


def test_greedy_samples_agree_across_chunk_budgets_and_prefix_caching(folder):
    """The issue's reproduction (112-token prompt, n=2, max_num_batched_tokens=127) and other
    chunkings: a chunk that left one prompt token made the request compress mid-prefill,
    with the query of a token it had not computed (the slot's previous owner's)."""
    prompt = random_prompts([112], vocab=384, seed=4)[0]
    alone = SamplingParams(max_tokens=40, **GREEDY)
    (reference,) = engine(folder, enable_prefix_caching=False).generate([prompt], alone, use_tqdm=False)
    assert reference.metrics["num_compressions"] > 0
    for chunk in (16, 17, 33, 111, 127, 8192):
        for caching in (True, False):
            llm = engine(folder, max_num_batched_tokens=chunk, enable_prefix_caching=caching)
            (out,) = llm.generate([prompt], SamplingParams(n=2, max_tokens=40, **GREEDY), use_tqdm=False)
            got = [c.token_ids for c in out.outputs]
            assert got == [reference.token_ids] * 2, f"chunk {chunk}, prefix caching {caching}"


def layer0_queries(model, token_ids: list[int], positions: list[int]) -> torch.Tensor:
    """Post-RoPE layer-0 queries (len(positions), H_q, D): layer 0 sees only token and position."""
    attn = model.model.layers[0].self_attn
    ids = torch.tensor([token_ids[t] for t in positions])
    h = model.model.layers[0].input_layernorm(model.model.embed_tokens(ids))
    q = attn.qkv_proj(h)[:, :attn.hq * attn.d].view(len(positions), attn.hq, attn.d)
    if attn.qk_norm:
        q = attn.q_norm(q)
    return model.rotary(q, torch.tensor(positions))


class RingCheck:
    """Test hook around the compressor: before each compression, compare the ring of window
    queries with the queries recomputed from the request's tokens."""

    def __init__(self, llm):
        self.llm, self.checked, self.kinds = llm, 0, set()
        self.hits: set[int] = set()
        compressor, bm = llm.runner.compressor, llm.block_manager
        run, allocate = compressor.run, bm.allocate_slots

        def checked_run(tasks):
            for t in tasks:
                self.check(t)
            run(tasks)

        def recorded_allocate(seq, num_new_tokens, cached_blocks=()):
            if cached_blocks:
                self.hits.add(seq.seq_id)
            return allocate(seq, num_new_tokens, cached_blocks)

        compressor.run, bm.allocate_slots = checked_run, recorded_allocate

    @torch.inference_mode()
    def check(self, task) -> None:
        seq = self.llm.scheduler.requests[task.seq_id]
        n = task.num_computed
        positions = list(range(n - W, n))
        expected = layer0_queries(self.llm.runner.model, seq.token_ids, positions)
        ring = self.llm.runner.query_cache[0, task.query_slot]
        got = torch.stack([ring[t % W] for t in positions])
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5,
                                   msg=lambda m: f"request {task.seq_id} at {n} tokens: {m}")
        self.checked += 1
        self.kinds |= {"preempted"} if seq.num_preemptions else set()
        self.kinds |= {"prefix hit"} if seq.seq_id in self.hits else set()
        self.kinds |= {"long prompt"} if n == seq.num_prompt_tokens else set()


@pytest.mark.parametrize("async_scheduling", [False, True])
def test_every_compression_reads_the_queries_of_its_own_last_tokens(folder, async_scheduling):
    base = random_prompts([64], vocab=384, seed=21)[0]
    prompts = random_prompts([112, 20, 90, 40], vocab=384, seed=22)
    prompts += [base + p for p in random_prompts([30, 50], vocab=384, seed=23)]
    params = [SamplingParams(n=2 if i == 0 else 1, max_tokens=50, **GREEDY) for i in range(len(prompts))]
    llm = engine(folder, kv_cache_tokens=28 * B, max_num_batched_tokens=127,
                 async_scheduling=async_scheduling)
    ring = RingCheck(llm)
    llm.generate(prompts, params, use_tqdm=False)
    assert llm.last_stats.num_preemptions > 0 and llm.block_manager.num_hit_tokens > 0
    assert ring.checked == llm.last_stats.num_compressions > 20
    assert ring.kinds == {"preempted", "prefix hit", "long prompt"}


def test_shared_prefix_blocks_are_rewritten_in_place_once_private(folder):
    """Requests sharing a 64-token prefix compress at different steps (different suffix
    lengths, staggered admission). The first to compress copies the shared blocks to fresh
    ones; once the last holder is alone with a block (reference count 1), it compacts into it
    in place while the others read their copies. Every sample equals its solo run."""
    base = random_prompts([64], vocab=384, seed=11)[0]
    prompts = [base + s for s in random_prompts([48, 3, 9, 20, 30], vocab=384, seed=12)]
    params = SamplingParams(n=2, max_tokens=90, **GREEDY)
    solo = engine(folder)
    reference = [solo.generate([p], SamplingParams(max_tokens=90, **GREEDY), use_tqdm=False)[0].token_ids
                 for p in prompts]
    for async_scheduling in (False, True):
        llm = engine(folder, max_num_batched_tokens=127, async_scheduling=async_scheduling)
        bm = llm.block_manager
        shared, rewritten, copied = set(), [], []
        allocate, plan = bm.allocate_slots, bm.plan_compression

        def recorded_allocate(seq, num_new_tokens, cached_blocks=()):
            shared.update(cached_blocks)
            return allocate(seq, num_new_tokens, cached_blocks)

        def recorded_plan(seq, num_kept_blocks):
            before = list(seq.block_table[:num_kept_blocks + 1])
            result = plan(seq, num_kept_blocks)
            if result is not None:
                kept = [b for b in before if b in result[0] and b in shared]
                rewritten.extend(kept)
                copied.extend(b for b in before if b in shared and b not in result[0])
            return result

        bm.allocate_slots, bm.plan_compression = recorded_allocate, recorded_plan
        outs = llm.generate(prompts, params, use_tqdm=False)
        assert [[c.token_ids for c in o.outputs] for o in outs] == [[r, r] for r in reference]
        assert rewritten and copied, "both paths: copy while shared, in place once private"
        assert bm.num_free_blocks == llm.num_kv_blocks
