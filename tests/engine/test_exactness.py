"""Greedy decoding equals Hugging Face transformers token for token (float32, CPU)."""
import pytest

from tests.engine.tiny_models import hf_greedy, random_prompts, tiny_checkpoint
from zipage import LLM, SamplingParams

LENGTHS = [3, 17, 40, 9, 64, 25, 1, 33]
NEW_TOKENS = 64


@pytest.fixture(scope="module", params=["llama", "qwen2", "qwen3"])
def model_and_reference(request):
    folder, hf = tiny_checkpoint(request.param)
    prompts = random_prompts(LENGTHS, vocab=384)
    reference = [hf_greedy(hf, p, NEW_TOKENS) for p in prompts]
    return folder, prompts, reference


def run(folder, prompts, **options):
    llm = LLM(folder, device="cpu", block_size=16, **options)
    params = SamplingParams(temperature=0, max_tokens=NEW_TOKENS, min_tokens=NEW_TOKENS)
    outputs = llm.generate(prompts, params, use_tqdm=False)
    assert llm.block_manager.num_free_blocks == llm.num_kv_blocks, "KV blocks leaked"
    return llm, [o.token_ids for o in outputs]


@pytest.mark.parametrize("prefix_caching", [True, False])
def test_batched_greedy_matches_transformers(model_and_reference, prefix_caching):
    folder, prompts, reference = model_and_reference
    _, tokens = run(folder, prompts, kv_cache_tokens=4096, enable_prefix_caching=prefix_caching)
    assert tokens == reference


def test_small_pool_preempts_and_still_matches(model_and_reference):
    folder, prompts, reference = model_and_reference
    llm, tokens = run(folder, prompts, kv_cache_tokens=16 * 14, max_num_batched_tokens=64)
    assert llm.scheduler.num_preemptions > 0
    assert tokens == reference


def test_shared_prefix_hits_cache_and_matches(model_and_reference):
    folder, prompts, _ = model_and_reference
    base = random_prompts([48], vocab=384, seed=7)[0]
    shared = [base + p[:5] for p in prompts[:4]]
    llm, tokens = run(folder, shared + shared, kv_cache_tokens=4096)
    assert llm.block_manager.num_hit_tokens >= 7 * 48
    assert tokens[:4] == tokens[4:]
    _, cold = run(folder, shared, kv_cache_tokens=4096, enable_prefix_caching=False)
    assert tokens[:4] == cold


def test_n_samples_share_the_prompt_blocks(model_and_reference):
    folder, prompts, reference = model_and_reference
    llm = LLM(folder, device="cpu", block_size=16, kv_cache_tokens=4096)
    params = SamplingParams(n=3, temperature=0, max_tokens=NEW_TOKENS, min_tokens=NEW_TOKENS)
    (out,) = llm.generate([prompts[4]], params, use_tqdm=False)
    assert [c.token_ids for c in out.outputs] == [reference[4]] * 3
    assert llm.block_manager.num_hit_tokens == 2 * 48  # 64-token prompt: 3 full blocks cached
    assert llm.block_manager.num_free_blocks == llm.num_kv_blocks
