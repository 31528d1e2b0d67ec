"""The real embedded SmolLM2-135M-Instruct: greedy output equals transformers'."""
import os

import pytest
import torch

from zipage import LLM, SamplingParams
from zipage.models.presets import smollm2_gguf_path

QUESTIONS = ["What is 2+3?", "Write a haiku about the sea.", "Name three prime numbers.",
             "Explain gravity in one sentence.", "What is the capital of France? Answer briefly.",
             "Count from one to ten in words.", "Give me a synonym for happy.",
             "Describe a cat to someone who has never seen one, in detail, with at least "
             "three different aspects of its behaviour and appearance."]
NEW_TOKENS = 64


@pytest.fixture(scope="module")
def smollm2():
    llm = LLM("smollm2-135m", device="cpu", block_size=16, kv_cache_tokens=4096, max_model_len=2048)
    prompts = [llm.tokenizer.apply_chat_template([{"role": "user", "content": q}], tokenize=False,
                                                 add_generation_prompt=True) for q in QUESTIONS]
    from transformers import AutoModelForCausalLM
    path = smollm2_gguf_path()
    hf = AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path),
                                              dtype=torch.float32).eval()
    reference = []
    for p in prompts:
        ids = llm.tokenizer(p).input_ids
        with torch.no_grad():
            out = hf.generate(torch.tensor([ids]), max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                              do_sample=False)
        reference.append(out[0, len(ids):].tolist())
    return llm, prompts, reference


def _generate(llm, prompts):
    params = SamplingParams(temperature=0, max_tokens=NEW_TOKENS, min_tokens=NEW_TOKENS)
    outs = llm.generate(prompts, params, use_tqdm=False)
    assert llm.block_manager.num_free_blocks == llm.num_kv_blocks
    return [o.token_ids for o in outs]


def test_greedy_batch_matches_transformers(smollm2):
    llm, prompts, reference = smollm2
    assert _generate(llm, prompts) == reference


def test_preemption_and_no_prefix_cache_still_match(smollm2):
    llm, prompts, reference = smollm2
    small = LLM("smollm2-135m", device="cpu", block_size=16, kv_cache_tokens=16 * 40,
                max_model_len=512, enable_prefix_caching=False, max_num_batched_tokens=128)
    assert _generate(small, prompts) == reference
    assert small.scheduler.num_preemptions > 0


def test_budget_larger_than_every_sequence_changes_nothing(smollm2):
    llm, prompts, reference = smollm2
    zipped = LLM("smollm2-135m", device="cpu", block_size=16, kv_cache_tokens=4096,
                 max_model_len=2048, budget=256, use_global_score=True, use_pooling=True,
                 redundancy="lightning")
    assert max(len(zipped.tokenizer(p).input_ids) for p in prompts) + NEW_TOKENS < 256
    assert _generate(zipped, prompts) == reference


def test_async_scheduling_stops_on_the_same_stop_string(smollm2):
    llm, prompts, _ = smollm2
    params = SamplingParams(temperature=0.7, seed=5, max_tokens=48, stop=[".", "\n"])
    outs = {}
    for mode in (False, True):
        llm.config.async_scheduling = mode
        outs[mode] = [(o.text, o.token_ids, o.finish_reason)
                      for o in llm.generate(prompts, params, use_tqdm=False)]
    llm.config.async_scheduling = False
    assert outs[True] == outs[False]
    assert sum(reason == "stop" for _, _, reason in outs[True]) >= 4
    assert llm.block_manager.num_free_blocks == llm.num_kv_blocks
