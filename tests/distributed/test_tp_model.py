"""Tensor parallelism on the CPU (gloo, two processes): the TP=2 model gives the logits and
the greedy tokens of the TP=1 model.

Models: tiny random Llama / Qwen2 / Qwen3 checkpoints (safetensors), random weights
(load_format="dummy", tied LM head, a vocabulary that does not split evenly), and the real
SmolLM2 GGUF at TP=3 (its 9 query and 3 KV heads do not split in two). Both sizes run the model's
own paged attention path (the PyTorch reference on a paged KV cache, paged_run.py): a
prefill, a step mixing decode rows with a prefill, then decode steps, feeding back argmax.
Sums split over ranks are added in another order, hence a tight tolerance on logits (fp32)
and exact equality on tokens.
"""
import shutil
from dataclasses import replace

import pytest
import torch

from tests.distributed import rank_fns
from tests.distributed.helpers import run_checked
from tests.distributed.shards import rebuild
from tests.engine.tiny_models import random_prompts, tiny_checkpoint, tiny_config
from zipage.distributed import SINGLE, TPGroup
from zipage.models.decoder import CausalLM
from zipage.models.loader import resolve, spec_for
from zipage.models.spec import rank_spec, spec_from_hf_config

ARCHS = ["llama", "qwen2", "qwen3"]
STEPS = 32
PROMPTS = random_prompts([5, 19, 33, 12], vocab=384)
TOL = dict(rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def cases():
    out = {}
    for arch in ARCHS:
        folder, _ = tiny_checkpoint(arch)
        out[arch] = (spec_for(folder, None), folder, None, "auto")
    # 387 rows: each rank holds 194, the last one zero padding; the LM head is the embedding.
    dummy = replace(spec_from_hf_config(tiny_config("qwen2")), vocab_size=387,
                    tie_word_embeddings=True)
    out["dummy"] = (dummy, None, None, "dummy")
    yield out
    for spec, folder, _, _ in out.values():
        if folder:
            shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def one_rank(cases):
    return rank_fns.model_outputs(SINGLE, cases, PROMPTS, STEPS)


@pytest.fixture(scope="module")
def two_ranks(cases):
    return run_checked(rank_fns.model_outputs, 2, cases, PROMPTS, STEPS)


@pytest.mark.parametrize("label", ARCHS + ["dummy"])
def test_logits_equal_one_rank_at_every_step(one_rank, two_ranks, label):
    reference = one_rank[label]["logits"]
    assert len(reference) == STEPS + 2
    for rank in two_ranks:
        for step, (got, want) in enumerate(zip(rank[label]["logits"], reference)):
            torch.testing.assert_close(got, want, **TOL, msg=lambda m: f"step {step}: {m}")
    for got, other in zip(two_ranks[0][label]["logits"], two_ranks[1][label]["logits"]):
        assert torch.equal(got, other), "ranks must hold identical gathered logits"


@pytest.mark.parametrize("arch", ARCHS)
def test_greedy_tokens_equal_one_rank(one_rank, two_ranks, arch):
    reference = one_rank[arch]["tokens"]
    assert [len(t) for t in reference] == [STEPS + 2] * 3 + [STEPS + 1]  # last one joins at step 1
    assert len({tok for t in reference for tok in t}) > 10, "degenerate reference"
    assert [r[arch]["tokens"] for r in two_ranks] == [reference, reference]


def test_every_rank_samples_the_same_tokens(two_ranks):
    """Sampling runs on every rank over the full gathered vocabulary: same tokens everywhere."""
    for label in two_ranks[0]:
        a, b = (r[label]["sampled"] for r in two_ranks)
        assert torch.equal(a, b)


def test_dummy_weights_are_slices_of_the_one_rank_weights(one_rank, two_ranks, cases):
    """Random weights are drawn whole and then sliced: rank shards put back together are the
    TP=1 weights, bit for bit (padding rows zero)."""
    params = dict(CausalLM(cases["dummy"][0]).named_parameters(remove_duplicate=False))
    for name, full in one_rank["dummy"]["state"].items():
        shards = [r["dummy"]["state"][name] for r in two_ranks]
        assert torch.equal(rebuild(params[name], shards), full), name
    embed = two_ranks[1]["dummy"]["state"]["model.embed_tokens.weight"]
    assert embed.shape[0] == 194 and not embed[-1].any()


def test_rank_spec_is_this_ranks_share():
    spec = spec_from_hf_config(tiny_config("qwen3"))
    half = CausalLM(spec, TPGroup(rank=1, size=2)).rank_spec
    assert (half.num_heads, half.num_kv_heads, half.intermediate_size) == (2, 1, 64)
    assert half.tp_size == 2
    assert (half.vocab_size, half.head_dim, half.hidden_size) == (384, 16, 64)  # whole vocabulary
    assert rank_spec(spec, 1) is spec


def test_head_counts_that_do_not_split_fail_clearly():
    spec = spec_from_hf_config(tiny_config("llama"))  # 4 heads, 2 KV heads
    with pytest.raises(ValueError, match="tensor_parallel_size=3 must divide "
                                         "num_attention_heads=4, num_key_value_heads=2"):
        CausalLM(spec, TPGroup(rank=0, size=3))
    with pytest.raises(ValueError, match="replicating KV heads over ranks is not supported"):
        CausalLM(spec, TPGroup(rank=0, size=8))  # more ranks than heads
    with pytest.raises(ValueError, match="must be >= 1"):
        rank_spec(spec, 0)


@pytest.mark.slow
def test_smollm2_gguf_at_three_ranks_equals_one_rank():
    path, gguf = resolve("smollm2-135m", "auto")
    spec = spec_for(path, gguf)
    with pytest.raises(ValueError, match="must divide num_attention_heads=9"):
        rank_spec(spec, 2)
    cases = {"smollm2": (spec, path, gguf, "auto")}
    prompts, steps = random_prompts([6, 23, 14], vocab=spec.vocab_size, seed=4), 8
    reference = rank_fns.model_outputs(SINGLE, cases, prompts, steps)["smollm2"]
    for rank in run_checked(rank_fns.model_outputs, 3, cases, prompts, steps, timeout=900):
        for got, want in zip(rank["smollm2"]["logits"], reference["logits"]):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        assert rank["smollm2"]["tokens"] == reference["tokens"]
