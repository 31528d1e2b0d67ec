"""Paged attention for one layer: write K/V (and window queries), then attend.

Rows of a batch are ordered one-token rows first (decode kernel), then multi-token prefill
chunks (prefill kernel, which also reads cached prefix blocks).
"""
from dataclasses import dataclass

import torch

from zipage.kernels import paged_decode_attention, paged_prefill_attention, store_kv, store_rows


@dataclass
class AttentionMetadata:
    slot_mapping: torch.Tensor  # (T,) flat KV slot of each new token
    num_decode: int  # leading rows with a single token
    decode_block_tables: torch.Tensor | None = None  # (num_decode, max_blocks)
    decode_context_lens: torch.Tensor | None = None  # (num_decode,)
    prefill_block_tables: torch.Tensor | None = None  # (num_prefill_seqs, max_blocks)
    prefill_cu_seqlens_q: torch.Tensor | None = None  # (num_prefill_seqs + 1,), from 0
    prefill_context_lens: torch.Tensor | None = None  # (num_prefill_seqs,)
    prefill_max_q_len: int = 0
    query_slot_mapping: torch.Tensor | None = None  # (T,) flat ring index m*W+w, -1 skip


def paged_attention(q, k, v, k_cache, v_cache, q_cache, meta: AttentionMetadata, scale: float,
                    k_scale=None, v_scale=None, fp8_decode_operand=None):
    """q (T, H_q, D), k/v (T, H_kv, D); caches (NB, b, H_kv, D); q_cache (M, W, H_q, D);
    k/v_scale (NB, b, H_kv) for an fp8 cache (zipage/kernels/fp8.py), else None;
    fp8_decode_operand: the decode kernel's fp8_operand (None: its default)."""
    store_kv(k, v, k_cache, v_cache, meta.slot_mapping, k_scale, v_scale)
    scales = dict(k_scale=k_scale, v_scale=v_scale)
    decode = dict(scales, fp8_operand=fp8_decode_operand)
    if q_cache is not None and meta.query_slot_mapping is not None:
        store_rows(q.reshape(q.shape[0], -1), q_cache.view(-1, q.shape[1] * q.shape[2]),
                   meta.query_slot_mapping)
    n = meta.num_decode
    if n == q.shape[0]:
        return paged_decode_attention(q, k_cache, v_cache, meta.decode_block_tables,
                                      meta.decode_context_lens, scale, **decode)
    out = torch.empty_like(q)
    if n:
        out[:n] = paged_decode_attention(q[:n], k_cache, v_cache, meta.decode_block_tables,
                                         meta.decode_context_lens, scale, **decode)
    out[n:] = paged_prefill_attention(q[n:], k_cache, v_cache, meta.prefill_block_tables,
                                      meta.prefill_cu_seqlens_q, meta.prefill_context_lens,
                                      meta.prefill_max_q_len, scale, **scales)
    return out
