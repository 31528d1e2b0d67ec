"""Property test over random mixes of requests (issue 11, "What it must show").

Each trial draws a mix: prompt lengths (some sharing a prefix), n, max_tokens, stop strings
and stop tokens, greedy or seeded sampling, invalid token ids; a KV budget (Full KV or
compressed), chunk size, sync or async scheduling, and sometimes an interrupt at a random
point. After every generate: all KV blocks free, no request in the scheduler, every query
slot returned; every valid request's output equals the same request run alone.
"""
import random
from collections import Counter

import pytest

from tests.engine.tiny_models import add_char_tokenizer, random_prompts, tiny_checkpoint
from zipage import LLM, SamplingParams

B = 16
BUDGETS = (None, 32, 64)
NUM_TRIALS = 14


@pytest.fixture(scope="module")
def folder():
    return add_char_tokenizer(tiny_checkpoint("qwen3", seed=3)[0])


@pytest.fixture(scope="module")
def engines(folder):
    """Per budget: (engine under test with a small pool, engine for solo runs)."""
    out = {}
    for budget in BUDGETS:
        llm = LLM(folder, device="cpu", block_size=B, budget=budget, kv_cache_tokens=B * 16)
        check_one_token_rows(llm, budget)
        out[budget] = llm, LLM(folder, device="cpu", block_size=B, budget=budget, kv_cache_tokens=4096)
    return out


def check_one_token_rows(llm, budget) -> None:
    """With compression, a one-token row is a decode whose table fits the decode kernel's
    CUDA-graph tables (C + 1 blocks), whatever the chunking."""
    launch = llm.runner.launch

    def checked(step, previous=None):
        for row in step.requests.values():
            if budget is not None and row.num_tokens == 1:
                assert row.sampling is not None and len(row.block_table) <= budget // B + 1
        return launch(step, previous)

    llm.runner.launch = checked


@pytest.fixture(scope="module")
def popular(engines):
    """Tokens the model emits often: stop tokens and stop strings that do trigger."""
    llm = engines[None][1]
    outs = llm.generate(random_prompts([5, 30, 60], vocab=384, seed=5),
                        SamplingParams(temperature=0, max_tokens=40, ignore_eos=True), use_tqdm=False)
    return [t for t, _ in Counter(t for o in outs for t in o.token_ids).most_common(12)]


def draw_mix(rng: random.Random, popular: list[int], tokenizer):
    base = random_prompts([48], vocab=384, seed=rng.randrange(1000))[0]
    prompts, params = [], []
    for _ in range(rng.randint(3, 7)):
        prompt = random_prompts([rng.randint(1, 100)], vocab=384, seed=rng.randrange(1000))[0]
        if rng.random() < 0.4:
            prompt = base + prompt[:rng.randint(1, 40)]
        if rng.random() < 0.12:
            prompt[rng.randrange(len(prompt))] = rng.choice([10**7, -5, 384])
        stops = [tokenizer.decode([t]) for t in rng.sample(popular, 2)] if rng.random() < 0.3 else None
        sampled = rng.random() < 0.3
        params.append(SamplingParams(
            n=rng.randint(1, 3), max_tokens=rng.randint(1, 60), stop=stops,
            temperature=0.8 if sampled else 0.0, seed=rng.randrange(100) if sampled else None,
            stop_token_ids=[rng.choice(popular)] if rng.random() < 0.3 else None,
            ignore_eos=True))
        prompts.append(prompt)
    return prompts, params


class Interrupt(KeyboardInterrupt):
    pass


def interrupt_at(llm, monkeypatch, step: int) -> None:
    original, calls = llm.engine.step, []

    def step_or_interrupt():
        calls.append(1)
        if len(calls) == step:
            raise Interrupt
        return original()

    monkeypatch.setattr(llm.engine, "step", step_or_interrupt)


def assert_empty(llm) -> None:
    assert llm.block_manager.num_free_blocks == llm.num_kv_blocks
    assert not llm.scheduler.requests and not llm.scheduler.running and not llm.scheduler.waiting
    assert sorted(llm.scheduler.free_slots) == list(range(llm.runner.num_query_slots))


def summary(out):
    return [(c.token_ids, c.text, c.finish_reason) for c in out.outputs]


def test_random_mixes_leave_nothing_behind_and_match_solo_runs(engines, popular, monkeypatch):
    rng = random.Random(1234)
    solo_cache, seen = {}, Counter()
    for trial in range(NUM_TRIALS):
        budget = rng.choice(BUDGETS)
        llm, solo = engines[budget]
        llm.config.async_scheduling = rng.random() < 0.5
        llm.config.max_num_batched_tokens = llm.scheduler.cfg.max_num_batched_tokens = rng.choice([32, 48, 256])
        prompts, params = draw_mix(rng, popular, llm.tokenizer)
        if rng.random() < 0.35:
            interrupt_at(llm, monkeypatch, rng.randint(1, 40))
            try:
                llm.generate(prompts, params, use_tqdm=False)
            except Interrupt:
                seen["interrupted"] += 1
            monkeypatch.undo()
            assert_empty(llm)
        outs = llm.generate(prompts, params, use_tqdm=False)
        assert_empty(llm)
        seen["preemptions"] += llm.last_stats.num_preemptions
        seen["compressions"] += llm.last_stats.num_compressions
        for prompt, p, out in zip(prompts, params, outs):
            if out.error:
                assert any(not 0 <= t < 384 for t in prompt), out.error
                seen["invalid"] += 1
                continue
            key = (budget, tuple(prompt), repr(p))
            if key not in solo_cache:
                solo_cache[key] = summary(solo.generate([prompt], p, use_tqdm=False)[0])
            assert summary(out) == solo_cache[key], f"trial {trial}, budget {budget}"
            seen.update(c.finish_reason for c in out.outputs)
    # The draws exercised every path.
    assert seen["interrupted"] >= 2 and seen["invalid"] >= 2 and seen["preemptions"] > 0
    assert seen["compressions"] > 0 and seen["stop"] > 0 and seen["length"] > 0
