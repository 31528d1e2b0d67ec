"""One decoder-only transformer covering Llama, Qwen2 (QKV bias) and Qwen3 (QK norm).

Parameter names follow Hugging Face checkpoints, so weights load by name, except two fused
projections (one GEMM instead of three or two, fewer launches in decode): qkv_proj = [q; k; v]
and gate_up_proj = [gate; up], concatenated at load time by `fuse_checkpoint_state`.
"""
import torch
from torch import nn
import torch.nn.functional as F

from zipage.layers.attention import AttentionMetadata, paged_attention
from zipage.layers.pointwise import add_rms_norm, op, rms_norm, rotary, silu_mul
from zipage.models.spec import ModelSpec, rope_inv_freq


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x, residual=None):
        if residual is None:
            return op(rms_norm, x)(x, self.weight, self.eps)
        return op(add_rms_norm, x)(x, residual, self.weight, self.eps)


class Rotary(nn.Module):
    def __init__(self, spec: ModelSpec):
        super().__init__()
        inv = rope_inv_freq(spec)
        t = torch.arange(spec.max_position_embeddings, dtype=torch.float32)
        freqs = torch.outer(t, inv)
        self.register_buffer("cos", freqs.cos(), persistent=False)
        self.register_buffer("sin", freqs.sin(), persistent=False)

    def forward(self, x, positions):
        """x (T, H, D); rotate-half (NeoX) layout, as in Hugging Face Llama/Qwen."""
        return op(rotary, x)(x, self.cos[positions], self.sin[positions])


class SelfAttention(nn.Module):
    def __init__(self, spec: ModelSpec):
        super().__init__()
        h, hq, hkv, d = spec.hidden_size, spec.num_heads, spec.num_kv_heads, spec.head_dim
        self.hq, self.hkv, self.d = hq, hkv, d
        self.scale = d ** -0.5
        self.qkv_proj = nn.Linear(h, (hq + 2 * hkv) * d, bias=spec.qkv_bias)
        self.o_proj = nn.Linear(hq * d, h, bias=False)
        if spec.qk_norm:
            self.q_norm = RMSNorm(d, spec.rms_norm_eps)
            self.k_norm = RMSNorm(d, spec.rms_norm_eps)
        self.qk_norm = spec.qk_norm
        # Set by the runner: views into the paged KV pool and the query ring buffer.
        self.k_cache = self.v_cache = self.q_cache = None

    def forward(self, x, positions, rotary: Rotary, meta: AttentionMetadata):
        t = x.shape[0]
        q, k, v = self.qkv_proj(x).split([self.hq * self.d, self.hkv * self.d,
                                          self.hkv * self.d], dim=-1)
        q, k, v = (y.view(t, -1, self.d) for y in (q, k, v))
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = rotary(q, positions), rotary(k, positions)
        o = paged_attention(q, k, v, self.k_cache, self.v_cache, self.q_cache, meta, self.scale)
        return self.o_proj(o.reshape(t, self.hq * self.d))


class MLP(nn.Module):
    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.gate_up_proj = nn.Linear(spec.hidden_size, 2 * spec.intermediate_size, bias=False)
        self.down_proj = nn.Linear(spec.intermediate_size, spec.hidden_size, bias=False)

    def forward(self, x):
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(op(silu_mul, gate)(gate, up))


FUSED = {"self_attn.qkv_proj": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
         "mlp.gate_up_proj": ("mlp.gate_proj", "mlp.up_proj")}


def fuse_checkpoint_state(state: dict) -> dict:
    """Hugging Face tensor names -> this model's: per layer, q/k/v and gate/up are
    concatenated along the output dim (weights and biases). Other names pass through."""
    state = dict(state)
    for name in [k for k in state if k.endswith(".self_attn.q_proj.weight")]:
        prefix = name[:-len("self_attn.q_proj.weight")]
        for fused, parts in FUSED.items():
            for kind in ("weight", "bias"):
                keys = [f"{prefix}{p}.{kind}" for p in parts]
                if all(k in state for k in keys):
                    state[f"{prefix}{fused}.{kind}"] = torch.cat([state.pop(k) for k in keys])
    return state


class DecoderLayer(nn.Module):
    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.input_layernorm = RMSNorm(spec.hidden_size, spec.rms_norm_eps)
        self.self_attn = SelfAttention(spec)
        self.post_attention_layernorm = RMSNorm(spec.hidden_size, spec.rms_norm_eps)
        self.mlp = MLP(spec)

    def forward(self, x, residual, positions, rotary, meta):
        """Returns (output before the residual add, residual stream): adds are fused into norms."""
        h, residual = (self.input_layernorm(x), x) if residual is None else self.input_layernorm(x, residual)
        h = self.self_attn(h, positions, rotary, meta)
        h, residual = self.post_attention_layernorm(h, residual)
        return self.mlp(h), residual


class Backbone(nn.Module):
    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.embed_tokens = nn.Embedding(spec.vocab_size, spec.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(spec) for _ in range(spec.num_layers))
        self.norm = RMSNorm(spec.hidden_size, spec.rms_norm_eps)


class CausalLM(nn.Module):
    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.spec = spec
        self.model = Backbone(spec)
        self.rotary = Rotary(spec)
        self.lm_head = nn.Linear(spec.hidden_size, spec.vocab_size, bias=False)
        if spec.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, input_ids, positions, meta: AttentionMetadata):
        """input_ids, positions (T,) -> hidden states (T, hidden)."""
        x, residual = self.model.embed_tokens(input_ids), None
        for layer in self.model.layers:
            x, residual = layer(x, residual, positions, self.rotary, meta)
        return self.model.norm(x, residual)[0]

    def logits(self, hidden):
        return self.lm_head(hidden).float()
