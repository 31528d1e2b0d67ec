"""fp8_key_rotation: with an fp8 cache, q and k are rotated by one orthonormal Hadamard
matrix before K is rounded to e4m3. The rotation changes no score (q.k, norms, cosines),
and it shrinks the logit error e4m3 makes on keys whose energy sits in a few channels."""
import pytest
import torch

from tests.engine.tiny_models import forced_logprobs, random_prompts
from zipage import LLM
from zipage.config import EngineConfig
from zipage.kernels.fp8 import dequantize_reference, quantize_reference
from zipage.layers.key_rotation import hadamard, rotate, rotates_keys


@pytest.mark.parametrize("d", [1, 2, 8, 64, 128])
def test_hadamard_is_symmetric_orthonormal_and_keeps_dot_products(d):
    h = hadamard(d, torch.float64, "cpu")
    assert torch.equal(h, h.T)
    torch.testing.assert_close(h @ h, torch.eye(d, dtype=torch.float64))
    q, k = torch.randn(7, 3, d, dtype=torch.float64), torch.randn(7, 3, d, dtype=torch.float64)
    torch.testing.assert_close((rotate(q) * rotate(k)).sum(-1), (q * k).sum(-1))


def test_head_dim_not_a_power_of_two_keeps_keys_unrotated_unless_asked():
    with pytest.raises(ValueError, match="power-of-two head_dim"):
        hadamard(96, torch.float32, "cpu")
    default = EngineConfig(model="x", kv_cache_dtype="fp8")
    with pytest.warns(UserWarning, match="stay unrotated: head_dim 96"):
        assert not rotates_keys(default, 96)
    assert default.rotates_keys
    asked = EngineConfig(model="x", kv_cache_dtype="fp8", fp8_key_rotation=True)
    with pytest.raises(ValueError, match="power-of-two head_dim"):
        rotates_keys(asked, 96)


def test_config_rotates_fp8_keys_by_default_and_rejects_rotation_without_fp8():
    assert EngineConfig(model="x", kv_cache_dtype="fp8").rotates_keys
    assert not EngineConfig(model="x", kv_cache_dtype="fp8", fp8_key_rotation=False).rotates_keys
    assert not EngineConfig(model="x").rotates_keys
    with pytest.raises(ValueError, match="kv_cache_dtype='fp8' only"):
        EngineConfig(model="x", fp8_key_rotation=True)
    with pytest.raises(ValueError, match="true, false or null"):
        EngineConfig(model="x", kv_cache_dtype="fp8", fp8_key_rotation="yes")


def test_rotation_cuts_the_e4m3_logit_error_of_keys_with_outlier_channels():
    torch.manual_seed(0)
    d = 128
    k, q = torch.randn(4096, d), torch.randn(64, d)
    k[:, :4] *= 30  # a few channels carry most of q.k, as RoPE's slow pairs do in real keys
    q[:, :4] *= 3

    def e4m3(x):
        return dequantize_reference(*quantize_reference(x))

    exact = q @ k.T
    plain = (q @ e4m3(k).T - exact).pow(2).mean().sqrt()
    rotated = (rotate(q) @ e4m3(rotate(k)).T - exact).pow(2).mean().sqrt()
    assert rotated < plain / 1.5  # 1.8x on this draw


def test_engine_rotates_only_fp8_caches_and_rotation_leaves_full_precision_outputs(folder):
    prompts = random_prompts([20, 40], vocab=384, seed=5)
    texts = random_prompts([50, 50], vocab=384, seed=6)
    opts = dict(device="cpu", block_size=16, kv_cache_tokens=1024)
    layers = lambda llm: [layer.self_attn for layer in llm.runner.model.model.layers]
    assert all(a.rotate_keys for a in layers(LLM(folder, kv_cache_dtype="fp8", **opts)))
    assert not any(a.rotate_keys for a in layers(LLM(folder, kv_cache_dtype="fp8",
                                                     fp8_key_rotation=False, **opts)))
    auto = LLM(folder, enable_prefix_caching=False, **opts)  # no blocks kept from the 1st run
    assert not any(a.rotate_keys for a in layers(auto))
    ref = forced_logprobs(auto, prompts, texts)
    for a in layers(auto):  # the same rotation on an fp32 cache: every log p unchanged
        a.rotate_keys = True
    torch.testing.assert_close(forced_logprobs(auto, prompts, texts), ref, atol=2e-5, rtol=0)
