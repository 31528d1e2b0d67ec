"""Seeded sampling is reproducible whatever the batch; the filters do what they say."""
import pytest
import torch

from tests.engine.tiny_models import random_prompts, tiny_checkpoint
from zipage import LLM, SamplingParams
from zipage.layers.sampler import sample, uniform_noise


@pytest.fixture(scope="module")
def llm():
    folder, _ = tiny_checkpoint("qwen3")
    return LLM(folder, device="cpu", block_size=16, kv_cache_tokens=8192)


def test_same_seed_same_tokens_alone_or_in_a_batch_of_16(llm):
    prompts = random_prompts([5 + 3 * i for i in range(16)], vocab=384, seed=3)
    params = [SamplingParams(temperature=1.0, top_p=0.9, seed=100 + i, max_tokens=32, ignore_eos=True)
              for i in range(16)]
    batch = llm.generate(prompts, params, use_tqdm=False)
    for i in (0, 7, 15):
        (alone,) = llm.generate([prompts[i]], params[i], use_tqdm=False)
        assert alone.token_ids == batch[i].token_ids
    assert len({tuple(o.token_ids) for o in batch}) == 16


def test_different_seeds_differ_and_samples_use_seed_plus_index(llm):
    prompt = random_prompts([12], vocab=384, seed=4)
    (many,) = llm.generate(prompt, SamplingParams(n=3, temperature=1.0, seed=5, max_tokens=24,
                                                  ignore_eos=True), use_tqdm=False)
    (third,) = llm.generate(prompt, SamplingParams(temperature=1.0, seed=7, max_tokens=24,
                                                   ignore_eos=True), use_tqdm=False)
    assert many.outputs[2].token_ids == third.token_ids
    assert many.outputs[0].token_ids != many.outputs[1].token_ids


def test_noise_is_uniform_and_depends_only_on_seed_and_position():
    u = uniform_noise(torch.tensor([1, 2]), torch.tensor([10, 10]), 50_000)
    assert 0 < u.min() and u.max() < 1
    assert abs(u.mean().item() - 0.5) < 0.01
    again = uniform_noise(torch.tensor([2]), torch.tensor([10]), 50_000)
    assert torch.equal(u[1], again[0])


def _sample(logits, **kw):
    n = logits.shape[0]
    t = torch.full((n,), kw.get("temperature", 1.0))
    return sample(logits, t, torch.full((n,), kw.get("top_k", -1)), torch.full((n,), kw.get("top_p", 1.0)),
                  torch.full((n,), kw.get("min_p", 0.0)), torch.arange(n), torch.zeros(n, dtype=torch.long),
                  all_greedy=False, use_min_p=kw.get("min_p", 0) > 0,
                  use_top_k_p=kw.get("top_k", -1) > 0 or kw.get("top_p", 1.0) < 1)


def test_top_k_top_p_min_p_restrict_the_support():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]])).repeat(2000, 1)
    assert set(_sample(logits, top_k=2).tolist()) == {0, 1}
    assert set(_sample(logits, top_p=0.7).tolist()) == {0, 1}
    assert set(_sample(logits, min_p=0.5).tolist()) == {0, 1}
    counts = torch.bincount(_sample(logits), minlength=4).float() / 2000
    assert torch.allclose(counts, torch.tensor([0.5, 0.3, 0.15, 0.05]), atol=0.04)
