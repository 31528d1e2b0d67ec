"""Architecture and RoPE settings read from transformers 4.x and 5.x config layouts."""
from types import SimpleNamespace

import pytest
import torch
from transformers import LlamaConfig

from zipage.models.presets import SHAPES
from zipage.models.spec import rope_inv_freq, spec_from_hf_config

LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192}


def v4_config(**extra):
    base = dict(architectures=["LlamaForCausalLM"], model_type="llama", vocab_size=100,
                hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, rms_norm_eps=1e-5, max_position_embeddings=4096)
    return SimpleNamespace(**{**base, **extra})


def test_v4_and_v5_layouts_give_the_same_spec():
    v4 = spec_from_hf_config(v4_config(rope_theta=500000.0, rope_scaling=dict(LLAMA3)))
    v5 = spec_from_hf_config(v4_config(rope_parameters={"rope_theta": 500000.0, **LLAMA3}))
    assert v4 == v5
    assert v4.rope_theta == 500000.0 and v4.rope_scaling["factor"] == 8.0


def test_default_rope_theta_is_read_not_assumed():
    qwen2 = spec_from_hf_config(v4_config(architectures=["Qwen2ForCausalLM"], model_type="qwen2",
                                          rope_theta=10000.0))
    assert qwen2.rope_theta == 10000.0 and qwen2.rope_scaling is None and qwen2.qkv_bias
    with pytest.raises(ValueError, match="rope"):
        spec_from_hf_config(v4_config())


def test_llama3_inverse_frequencies_match_transformers():
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    cfg = LlamaConfig(hidden_size=256, num_attention_heads=2, max_position_embeddings=131072,
                      rope_parameters={"rope_theta": 500000.0, **LLAMA3})
    expected, _ = ROPE_INIT_FUNCTIONS["llama3"](cfg, "cpu")
    spec = spec_from_hf_config(v4_config(hidden_size=256, num_attention_heads=2,
                                         rope_parameters={"rope_theta": 500000.0, **LLAMA3}))
    assert spec.head_dim == 128
    torch.testing.assert_close(rope_inv_freq(spec), expected, rtol=0, atol=0)


def test_preset_shapes_are_the_published_ones():
    q8 = spec_from_hf_config(SimpleNamespace(**SHAPES["qwen3-8b"]))
    assert (q8.num_layers, q8.num_heads, q8.num_kv_heads, q8.head_dim, q8.qk_norm) == (36, 32, 8, 128, True)
    r1 = spec_from_hf_config(SimpleNamespace(**SHAPES["r1-distill-qwen-7b"]))
    assert (r1.arch, r1.num_kv_heads, r1.head_dim, r1.rope_theta, r1.qkv_bias) == ("qwen2", 4, 128, 10000.0, True)


def test_unsupported_rope_type_is_named():
    with pytest.raises(ValueError, match="yarn"):
        spec_from_hf_config(v4_config(rope_parameters={"rope_theta": 1e4, "rope_type": "yarn"}))
