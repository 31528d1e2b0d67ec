"""Tensor parallelism on two GPUs (NCCL): `pytest -m gpu tests/distributed`.

TP=2 equals TP=1 on tiny random models in fp32 (Triton attention kernels, NCCL all-reduce),
and a Qwen3-8B-shaped random model splits its weights in two and runs in bf16.
"""
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

from tests.distributed import rank_fns
from tests.distributed.helpers import run_checked
from tests.engine.tiny_models import random_prompts, tiny_checkpoint
from zipage.distributed import TPGroup
from zipage.models.loader import spec_for
from zipage.models.presets import SHAPES
from zipage.models.spec import spec_from_hf_config

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(torch.cuda.device_count() < 2,
                                                  reason="needs two CUDA GPUs")]


def _run(fn, *args):
    return run_checked(fn, 2, *args, timeout=600, device_type="cuda")


def test_tiny_models_fp32_two_gpus_equal_one_gpu():
    cases = {}
    for arch in ("llama", "qwen2", "qwen3"):
        folder, _ = tiny_checkpoint(arch)
        cases[arch] = (spec_for(folder, None), folder, None, "auto")
    prompts, steps = random_prompts([5, 19, 33, 12], vocab=384), 32
    one = rank_fns.model_outputs(TPGroup(device=torch.device("cuda", 0)), cases, prompts, steps)
    two = _run(rank_fns.model_outputs, cases, prompts, steps)
    for arch in cases:
        for rank in two:
            for got, want in zip(rank[arch]["logits"], one[arch]["logits"]):
                torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
            assert rank[arch]["tokens"] == one[arch]["tokens"]
        assert torch.equal(two[0][arch]["sampled"], two[1][arch]["sampled"])


def test_qwen3_8b_shape_splits_in_two_and_runs_in_bf16():
    spec = spec_from_hf_config(SimpleNamespace(**SHAPES["qwen3-8b"]))
    spec = replace(spec, num_layers=4)  # the layer count changes no sharding
    ranks = _run(rank_fns.dummy_forward, spec, torch.bfloat16, 300)
    whole = rank_fns.dummy_forward(TPGroup(device=torch.device("cuda", 0)), spec,
                                   torch.bfloat16, 300)
    for r in ranks:
        assert r["param_bytes"] < 0.51 * whole["param_bytes"]
        assert torch.isfinite(r["logits"]).all()
        # bf16 sums in another order: close to one GPU, not equal
        cos = torch.nn.functional.cosine_similarity(r["logits"], whole["logits"], dim=-1)
        assert cos.min() > 0.99
    assert torch.equal(ranks[0]["logits"], ranks[1]["logits"])
