"""One decoder-only transformer covering Llama, Qwen2 (QKV bias) and Qwen3 (QK norm).

Parameter names follow Hugging Face checkpoints, so weights load by name.
"""
import torch
from torch import nn
import torch.nn.functional as F

from zipage.layers.attention import AttentionMetadata, paged_attention
from zipage.models.spec import ModelSpec, rope_inv_freq


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


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
        cos = self.cos[positions].unsqueeze(1)
        sin = self.sin[positions].unsqueeze(1)
        x1, x2 = x.float().chunk(2, dim=-1)
        out = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
        return out.to(x.dtype)


class SelfAttention(nn.Module):
    def __init__(self, spec: ModelSpec):
        super().__init__()
        h, hq, hkv, d = spec.hidden_size, spec.num_heads, spec.num_kv_heads, spec.head_dim
        self.hq, self.hkv, self.d = hq, hkv, d
        self.scale = d ** -0.5
        self.q_proj = nn.Linear(h, hq * d, bias=spec.qkv_bias)
        self.k_proj = nn.Linear(h, hkv * d, bias=spec.qkv_bias)
        self.v_proj = nn.Linear(h, hkv * d, bias=spec.qkv_bias)
        self.o_proj = nn.Linear(hq * d, h, bias=False)
        if spec.qk_norm:
            self.q_norm = RMSNorm(d, spec.rms_norm_eps)
            self.k_norm = RMSNorm(d, spec.rms_norm_eps)
        self.qk_norm = spec.qk_norm
        # Set by the runner: views into the paged KV pool and the query ring buffer.
        self.k_cache = self.v_cache = self.q_cache = None

    def forward(self, x, positions, rotary: Rotary, meta: AttentionMetadata):
        t = x.shape[0]
        q = self.q_proj(x).view(t, self.hq, self.d)
        k = self.k_proj(x).view(t, self.hkv, self.d)
        v = self.v_proj(x).view(t, self.hkv, self.d)
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = rotary(q, positions), rotary(k, positions)
        o = paged_attention(q, k, v, self.k_cache, self.v_cache, self.q_cache, meta, self.scale)
        return self.o_proj(o.reshape(t, self.hq * self.d))


class MLP(nn.Module):
    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.gate_proj = nn.Linear(spec.hidden_size, spec.intermediate_size, bias=False)
        self.up_proj = nn.Linear(spec.hidden_size, spec.intermediate_size, bias=False)
        self.down_proj = nn.Linear(spec.intermediate_size, spec.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.input_layernorm = RMSNorm(spec.hidden_size, spec.rms_norm_eps)
        self.self_attn = SelfAttention(spec)
        self.post_attention_layernorm = RMSNorm(spec.hidden_size, spec.rms_norm_eps)
        self.mlp = MLP(spec)

    def forward(self, x, positions, rotary, meta):
        x = x + self.self_attn(self.input_layernorm(x), positions, rotary, meta)
        return x + self.mlp(self.post_attention_layernorm(x))


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
        x = self.model.embed_tokens(input_ids)
        for layer in self.model.layers:
            x = layer(x, positions, self.rotary, meta)
        return self.model.norm(x)

    def logits(self, hidden):
        return self.lm_head(hidden).float()
