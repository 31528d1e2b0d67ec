"""Architecture facts read from a Hugging Face config (transformers 4.x or 5.x layout)."""
import math

import torch
from dataclasses import dataclass, replace

SUPPORTED_ARCHITECTURES = {
    "LlamaForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
}


@dataclass(frozen=True)
class ModelSpec:
    arch: str  # "llama" | "qwen2" | "qwen3"
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    max_position_embeddings: int
    rope_theta: float
    rope_scaling: dict | None  # llama3-style scaling parameters, or None
    tie_word_embeddings: bool
    qkv_bias: bool
    qk_norm: bool
    # 1: the whole model. N: one rank's share of N (see rank_spec): heads, KV heads and MLP
    # columns are that rank's; the vocabulary stays whole (logits are gathered).
    tp_size: int = 1


def _rope_settings(hf) -> tuple[float, dict | None]:
    params = getattr(hf, "rope_parameters", None)  # transformers 5.x
    if isinstance(params, dict) and "rope_theta" in params:
        theta, rope = params["rope_theta"], params
    else:  # transformers 4.x
        theta = getattr(hf, "rope_theta", None)
        if theta is None:
            raise ValueError("config has neither rope_parameters nor rope_theta")
        rope = getattr(hf, "rope_scaling", None) or {}
    rope_type = rope.get("rope_type", rope.get("type", "default")) or "default"
    if rope_type == "default":
        return float(theta), None
    if rope_type == "llama3":
        keys = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
        return float(theta), {k: rope[k] for k in keys}
    raise ValueError(f"unsupported RoPE type {rope_type!r} (supported: default, llama3)")


def spec_from_hf_config(hf) -> ModelSpec:
    archs = getattr(hf, "architectures", None) or []
    model_type = getattr(hf, "model_type", "")
    arch = next((SUPPORTED_ARCHITECTURES[a] for a in archs if a in SUPPORTED_ARCHITECTURES), None)
    if arch is None and model_type in SUPPORTED_ARCHITECTURES.values():
        arch = model_type
    if arch is None:
        raise ValueError(f"unsupported architecture {archs or model_type!r}; "
                         f"supported: {', '.join(SUPPORTED_ARCHITECTURES)}")
    theta, scaling = _rope_settings(hf)
    head_dim = getattr(hf, "head_dim", None) or hf.hidden_size // hf.num_attention_heads
    return ModelSpec(
        arch=arch, vocab_size=hf.vocab_size, hidden_size=hf.hidden_size,
        intermediate_size=hf.intermediate_size, num_layers=hf.num_hidden_layers,
        num_heads=hf.num_attention_heads,
        num_kv_heads=getattr(hf, "num_key_value_heads", None) or hf.num_attention_heads,
        head_dim=head_dim, rms_norm_eps=hf.rms_norm_eps,
        max_position_embeddings=hf.max_position_embeddings,
        rope_theta=theta, rope_scaling=scaling,
        tie_word_embeddings=bool(getattr(hf, "tie_word_embeddings", False)),
        qkv_bias=arch == "qwen2" or bool(getattr(hf, "attention_bias", False)),
        qk_norm=arch == "qwen3",
    )


def rank_spec(spec: ModelSpec, tp_size: int) -> ModelSpec:
    """What each of `tp_size` ranks holds: it is what sizes one rank's KV cache, query ring
    and compression buffers. Each rank keeps whole heads, so it scores and compresses its own
    KV heads with no cross-rank traffic."""
    if tp_size == 1:
        return spec
    if tp_size < 1:
        raise ValueError(f"tensor_parallel_size must be >= 1, got {tp_size}")
    problems = [f"{name}={n}" for name, n in (
        ("num_attention_heads", spec.num_heads), ("num_key_value_heads", spec.num_kv_heads),
        ("intermediate_size", spec.intermediate_size)) if n % tp_size]
    if problems:
        hint = (" (replicating KV heads over ranks is not supported)"
                if tp_size > spec.num_kv_heads else "")
        raise ValueError(f"tensor_parallel_size={tp_size} must divide {', '.join(problems)} "
                         f"of this {spec.arch} model{hint}")
    return replace(spec, num_heads=spec.num_heads // tp_size,
                   num_kv_heads=spec.num_kv_heads // tp_size,
                   intermediate_size=spec.intermediate_size // tp_size, tp_size=tp_size)


def rope_inv_freq(spec: ModelSpec) -> torch.Tensor:
    """Inverse frequencies in float32, computed the way transformers does (bit-identical)."""
    d = spec.head_dim
    inv = 1.0 / (spec.rope_theta ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    s = spec.rope_scaling
    if s is None:
        return inv
    old_len = s["original_max_position_embeddings"]
    low_wl, high_wl = old_len / s["low_freq_factor"], old_len / s["high_freq_factor"]
    wavelength = 2 * math.pi / inv
    scaled = torch.where(wavelength > low_wl, inv / s["factor"], inv)
    smooth = (old_len / wavelength - s["low_freq_factor"]) / (s["high_freq_factor"] - s["low_freq_factor"])
    smoothed = (1 - smooth) * scaled / s["factor"] + smooth * scaled
    medium = ~(wavelength < high_wl) & ~(wavelength > low_wl)
    return torch.where(medium, smoothed, scaled)
