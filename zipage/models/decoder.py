"""One decoder-only transformer covering Llama, Qwen2 (QKV bias) and Qwen3 (QK norm).

Parameter names follow Hugging Face checkpoints, so weights load by name, except two fused
projections (one GEMM instead of three or two, fewer launches in decode): qkv_proj = [q; k; v]
and gate_up_proj = [gate; up], filled part by part at load time (zipage.models.weights).

With a tensor-parallel group of N ranks, each rank holds num_heads/N query heads and
num_kv_heads/N KV heads (column-parallel qkv, row-parallel o_proj), 1/N of the MLP columns
and 1/N of the vocabulary; norms and RoPE are replicated. With N = 1 it is the plain model.
"""
import torch
from torch import nn

from zipage.distributed.group import SINGLE, TPGroup
from zipage.layers.attention import AttentionMetadata, paged_attention
from zipage.layers.embedding import ParallelLMHead, VocabParallelEmbedding
from zipage.layers.linear import ColumnParallelLinear, RowParallelLinear
from zipage.kernels.qk_rotary import qk_rotary
from zipage.kernels.silu_mul import silu_mul
from zipage.layers.pointwise import add_rms_norm, op, rms_norm, rotary
from zipage.models.spec import ModelSpec, rank_spec, rope_inv_freq


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

    def tables(self, positions):
        """(cos, sin), each (T, D/2) float32: gathered once a step, shared by every layer."""
        return self.cos[positions], self.sin[positions]

    def forward(self, x, positions):
        """x (T, H, D); rotate-half (NeoX) layout, as in Hugging Face Llama/Qwen."""
        return op(rotary, x)(x, *self.tables(positions))


class SelfAttention(nn.Module):
    def __init__(self, spec: ModelSpec, tp: TPGroup):
        super().__init__()
        h, hq, hkv, d = spec.hidden_size, spec.num_heads, spec.num_kv_heads, spec.head_dim
        self.hq, self.hkv, self.d = hq // tp.size, hkv // tp.size, d  # this rank's heads
        self.scale = d ** -0.5
        self.qkv_proj = ColumnParallelLinear(h, [hq * d, hkv * d, hkv * d], spec.qkv_bias, tp)
        self.o_proj = RowParallelLinear(hq * d, h, tp)
        if spec.qk_norm:
            self.q_norm = RMSNorm(d, spec.rms_norm_eps)
            self.k_norm = RMSNorm(d, spec.rms_norm_eps)
        self.qk_norm = spec.qk_norm
        # Set by the runner: views into the paged KV pool and the query ring buffer, and for
        # an fp8 pool the K/V scales (zipage/kernels/fp8.py).
        self.k_cache = self.v_cache = self.q_cache = None
        self.k_scale = self.v_scale = None
        self.rotate_keys = False  # q and k times the Hadamard matrix (key_rotation.py)
        self.fp8_decode_operand = None  # EngineConfig.fp8_decode: None (f16) or e4m3

    def forward(self, x, rope, meta: AttentionMetadata):
        """x (T, hidden); rope = Rotary.tables(positions)."""
        t, qk_width = x.shape[0], (self.hq + self.hkv) * self.d
        qkv = self.qkv_proj(x)
        norms = (self.q_norm.weight, self.k_norm.weight) if self.qk_norm else (None, None)
        eps = self.q_norm.eps if self.qk_norm else 0.0
        q, k = qk_rotary(qkv, self.hq, self.hkv, self.d, *rope, *norms, eps,
                         rotate_keys=self.rotate_keys)
        v = qkv[:, qk_width:].view(t, self.hkv, self.d)
        o = paged_attention(q, k, v, self.k_cache, self.v_cache, self.q_cache, meta, self.scale,
                            self.k_scale, self.v_scale, self.fp8_decode_operand)
        return self.o_proj(o.reshape(t, self.hq * self.d))


class MLP(nn.Module):
    def __init__(self, spec: ModelSpec, tp: TPGroup):
        super().__init__()
        h, i = spec.hidden_size, spec.intermediate_size
        self.gate_up_proj = ColumnParallelLinear(h, [i, i], False, tp)
        self.down_proj = RowParallelLinear(i, h, tp)

    def forward(self, x):
        return self.down_proj(silu_mul(self.gate_up_proj(x)))


class DecoderLayer(nn.Module):
    def __init__(self, spec: ModelSpec, tp: TPGroup):
        super().__init__()
        self.input_layernorm = RMSNorm(spec.hidden_size, spec.rms_norm_eps)
        self.self_attn = SelfAttention(spec, tp)
        self.post_attention_layernorm = RMSNorm(spec.hidden_size, spec.rms_norm_eps)
        self.mlp = MLP(spec, tp)

    def forward(self, x, residual, rope, meta):
        """Returns (output before the residual add, residual stream): adds are fused into norms."""
        h, residual = (self.input_layernorm(x), x) if residual is None else self.input_layernorm(x, residual)
        h = self.self_attn(h, rope, meta)
        h, residual = self.post_attention_layernorm(h, residual)
        return self.mlp(h), residual


class Backbone(nn.Module):
    def __init__(self, spec: ModelSpec, tp: TPGroup):
        super().__init__()
        self.embed_tokens = VocabParallelEmbedding(spec.vocab_size, spec.hidden_size, tp)
        self.layers = nn.ModuleList(DecoderLayer(spec, tp) for _ in range(spec.num_layers))
        self.norm = RMSNorm(spec.hidden_size, spec.rms_norm_eps)


class CausalLM(nn.Module):
    def __init__(self, spec: ModelSpec, tp: TPGroup = SINGLE):
        super().__init__()
        self.spec = spec  # the whole model's architecture
        self.rank_spec = rank_spec(spec, tp.size)  # this rank's heads: sizes its caches
        self.tp = tp
        self.model = Backbone(spec, tp)
        self.rotary = Rotary(spec)
        tied = self.model.embed_tokens if spec.tie_word_embeddings else None
        self.lm_head = ParallelLMHead(spec.vocab_size, spec.hidden_size, tp, tied)

    def forward(self, input_ids, positions, meta: AttentionMetadata):
        """input_ids, positions (T,) -> hidden states (T, hidden)."""
        x, residual = self.model.embed_tokens(input_ids), None
        rope = self.rotary.tables(positions)
        for layer in self.model.layers:
            x, residual = layer(x, residual, rope, meta)
        return self.model.norm(x, residual)[0]

    def logits(self, hidden):
        """(T, hidden) -> (T, vocab) float32, the full vocabulary on every rank."""
        return self.lm_head(hidden)
