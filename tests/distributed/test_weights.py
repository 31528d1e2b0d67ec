"""Per-rank weight loading, in one process: a rank's share needs no collective to load, so
both ranks of TP=2 are built here and put back together."""
import os
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from tests.distributed.shards import rebuild
from tests.engine.tiny_models import tiny_checkpoint
from zipage.distributed import TPGroup
from zipage.models.loader import build_model, spec_for

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def qwen2():  # has every kind of tensor: fused q/k/v with biases, gate/up, untied head
    folder, hf = tiny_checkpoint("qwen2")
    yield folder, spec_for(folder, None), hf.state_dict()
    shutil.rmtree(folder, ignore_errors=True)


def _build(folder, spec, rank=0, size=1):
    return build_model(spec, folder, None, "auto", torch.float32, CPU, tp=TPGroup(rank, size))


def test_rank_shards_of_a_safetensors_checkpoint_are_its_tensors(qwen2):
    folder, spec, hf = qwen2
    whole = dict(_build(folder, spec).named_parameters())
    ranks = [dict(_build(folder, spec, r, 2).named_parameters()) for r in (0, 1)]
    prefix = "model.layers.1."
    q, k, v = (hf[f"{prefix}self_attn.{x}_proj.weight"] for x in "qkv")
    assert ranks[0][f"{prefix}self_attn.qkv_proj.weight"].shape == ((4 + 2 + 2) * 16 // 2, 64)
    torch.testing.assert_close(rebuild(whole[f"{prefix}self_attn.qkv_proj.weight"],
                                       [r[f"{prefix}self_attn.qkv_proj.weight"] for r in ranks]),
                               torch.cat([q, k, v]), rtol=0, atol=0)
    # Rank 1 holds the second query head pair and the second KV head of each of q, k, v.
    torch.testing.assert_close(ranks[1][f"{prefix}self_attn.qkv_proj.bias"],
                               torch.cat([hf[f"{prefix}self_attn.{x}_proj.bias"].chunk(2)[1]
                                          for x in "qkv"]), rtol=0, atol=0)
    for name, param in whole.items():
        assert torch.equal(rebuild(param, [r[name].detach() for r in ranks]), param), name


def _edited_copy(folder, tmp_path, edit):
    state = load_file(os.path.join(folder, "model.safetensors"))
    edit(state)
    out = tmp_path / "edited"
    out.mkdir()
    save_file(state, str(out / "model.safetensors"))
    shutil.copy(os.path.join(folder, "config.json"), out / "config.json")
    return str(out)


def test_missing_and_unexpected_tensors_are_named(qwen2, tmp_path):
    folder, spec, _ = qwen2
    def edit(s):
        s["model.layers.0.self_attn.extra.weight"] = s.pop("model.layers.0.self_attn.v_proj.weight")
    bad = _edited_copy(folder, tmp_path, edit)
    with pytest.raises(ValueError, match=r"missing \['model.layers.0.self_attn.v_proj.weight'\], "
                       r"unexpected \['model.layers.0.self_attn.extra.weight'\]"):
        _build(bad, spec, 1, 2)


def test_a_misshapen_tensor_is_named(qwen2, tmp_path):
    folder, spec, _ = qwen2
    def shrink(s):
        s["model.layers.0.mlp.up_proj.weight"] = s["model.layers.0.mlp.up_proj.weight"][:-1]
    bad = _edited_copy(folder, tmp_path, shrink)
    with pytest.raises(ValueError, match=r"model.layers.0.mlp.up_proj.weight: tensor of shape "
                       r"\[127, 64\] does not fit a parameter of shape \[128, 64\]"):
        _build(bad, spec, 0, 2)
