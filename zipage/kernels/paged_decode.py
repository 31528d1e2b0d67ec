"""Paged decode attention (one query token per request), split-K / flash-decoding style.

Kernel 1, grid (B, H_kv, S): a program owns one KV head of one request and one contiguous
range of key tiles (split). It handles all G = H_q // H_kv query heads of that KV head at
once, so each K/V tile is loaded once per group, and writes unnormalised partial results
(running max m, sum l, accumulator acc) to fp32 scratch. Kernel 2, grid (B, H_q), merges
the S partials. Key ranges come from context_lens inside the kernel, so grid and scratch
depend only on shapes: the pair is CUDA-graph capturable.
"""
import functools
import math

import torch

from zipage.kernels._dispatch import (cdiv, dot_dtype, dot_precision, next_pow2, tl, triton,
                                      use_triton)

LOG2E = 1.4426950408889634


@triton.jit
def _decode_split_kernel(Q, K, V, BT, CTX, PO, PM, PL, qk_scale,
                         stride_qb, stride_qh, stride_kb, stride_kt, stride_kh, stride_bt,
                         H_Q, G, D, NUM_SPLITS,
                         BLOCK_SIZE: tl.constexpr, BLOCK_N: tl.constexpr,
                         G_PAD: tl.constexpr, D_PAD: tl.constexpr, DOT_PREC: tl.constexpr,
                         DOT_DTYPE: tl.constexpr):
    b = tl.program_id(0)
    kvh = tl.program_id(1)
    split = tl.program_id(2)
    ctx = tl.load(CTX + b)
    n_tiles = tl.cdiv(ctx, BLOCK_N)
    per_split = tl.cdiv(n_tiles, NUM_SPLITS)
    t_lo = split * per_split
    t_hi = tl.minimum(t_lo + per_split, n_tiles)

    g = tl.arange(0, G_PAD)  # padded to >= 16 rows for tl.dot; extra rows are masked
    d = tl.arange(0, D_PAD)
    heads = kvh * G + g
    g_ok = g < G
    d_ok = d < D
    q = tl.load(Q + b.to(tl.int64) * stride_qb + heads[:, None] * stride_qh + d[None, :],
                mask=g_ok[:, None] & d_ok[None, :], other=0.0)
    q = q.to(DOT_DTYPE)

    m_i = tl.full([G_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([G_PAD], tl.float32)
    acc = tl.zeros([G_PAD, D_PAD], tl.float32)
    offs_n = tl.arange(0, BLOCK_N)
    bt_row = BT + b.to(tl.int64) * stride_bt
    for t in range(t_lo, t_hi):
        tok = t * BLOCK_N + offs_n
        valid = tok < ctx  # also keeps table padding (-1) from being read
        page = tl.load(bt_row + tok // BLOCK_SIZE, mask=valid, other=0).to(tl.int64)
        kv_off = (page[:, None] * stride_kb + (tok % BLOCK_SIZE)[:, None] * stride_kt
                  + kvh * stride_kh + d[None, :])
        kv_mask = valid[:, None] & d_ok[None, :]
        k = tl.load(K + kv_off, mask=kv_mask, other=0.0).to(DOT_DTYPE)
        s = tl.dot(q, tl.trans(k), input_precision=DOT_PREC) * qk_scale  # log2 domain
        s = tl.where(valid[None, :], s, float("-inf"))
        # every tile has >= 1 valid key, so m_new is finite and exp2 never sees inf - inf
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + kv_off, mask=kv_mask, other=0.0).to(DOT_DTYPE)
        acc = acc * alpha[:, None] + tl.dot(p.to(DOT_DTYPE), v, input_precision=DOT_PREC)
        m_i = m_new

    # empty splits (incl. context_len 0) store m=-inf, l=0, acc=0; the merge ignores them
    row = ((b * H_Q + heads) * NUM_SPLITS + split).to(tl.int64)
    tl.store(PM + row, m_i, mask=g_ok)
    tl.store(PL + row, l_i, mask=g_ok)
    tl.store(PO + row[:, None] * D + d[None, :], acc, mask=g_ok[:, None] & d_ok[None, :])


@triton.jit
def _decode_merge_kernel(PO, PM, PL, OUT, stride_ob, stride_oh, H_Q, D, NUM_SPLITS,
                         S_PAD: tl.constexpr, D_PAD: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    s = tl.arange(0, S_PAD)
    d = tl.arange(0, D_PAD)
    s_ok = s < NUM_SPLITS
    d_ok = d < D
    row = ((b * H_Q + h) * NUM_SPLITS + s).to(tl.int64)
    m = tl.load(PM + row, mask=s_ok, other=float("-inf"))
    l = tl.load(PL + row, mask=s_ok, other=0.0)
    m_max = tl.max(m, 0)
    m_max = tl.where(m_max == float("-inf"), 0.0, m_max)  # all empty -> weights 0, output 0
    w = tl.exp2(m - m_max)
    denom = tl.sum(w * l, 0)
    acc = tl.load(PO + row[:, None] * D + d[None, :], mask=s_ok[:, None] & d_ok[None, :],
                  other=0.0)
    o = tl.sum(acc * w[:, None], 0) / tl.where(denom > 0.0, denom, 1.0)
    tl.store(OUT + b.to(tl.int64) * stride_ob + h * stride_oh + d, o.to(OUT.dtype.element_ty),
             mask=d_ok)


@functools.lru_cache(maxsize=None)
def _num_sms(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def default_num_splits(batch: int, num_kv_heads: int, max_keys: int, device: torch.device,
                       block_n: int = 64) -> int:
    """Enough programs for ~4 waves of the GPU; shape-only, so stable under CUDA graphs."""
    sms = _num_sms(device.index if device.index is not None else torch.cuda.current_device()) \
        if device.type == "cuda" else 4
    want = cdiv(4 * sms, max(1, batch * num_kv_heads))
    return max(1, min(want, cdiv(max(max_keys, 1), block_n), 64))


def decode_scratch(batch, num_q_heads, head_dim, num_splits, device):
    """Preallocated fp32 scratch (partial acc, max, sum) for paged_decode_attention."""
    f32 = dict(dtype=torch.float32, device=device)
    return (torch.empty(batch, num_q_heads, num_splits, head_dim, **f32),
            torch.empty(batch, num_q_heads, num_splits, **f32),
            torch.empty(batch, num_q_heads, num_splits, **f32))


def paged_decode_attention(q, k_cache, v_cache, block_tables, context_lens, scale,
                           num_splits=None, out=None, scratch=None, block_n=None):
    """Attention of one new query token per request over its paged K/V.

    q:            (B, H_q, D); unit stride on D (B/H strides free).
    k/v_cache:    (NB, b, H_kv, D), same strides; any block size b (powers of two tested);
                  H_q % H_kv == 0.
    block_tables: int32 (B, max_blocks), padded with -1 (padding is never read).
    context_lens: int32 (B,), keys visible (current token included); 0 -> output zeros.
    num_splits:   key-range splits per (request, KV head); default from shapes only.
    out:          optional (B, H_q, D) output buffer (q.dtype).
    scratch:      optional decode_scratch(B, H_q, D, num_splits) buffers.
    Returns out (B, H_q, D) in q.dtype. No host sync: CUDA-graph capturable.
    """
    if not use_triton(q):
        return paged_decode_attention_reference(q, k_cache, v_cache, block_tables,
                                                context_lens, scale, out=out)
    B, H_q, D = q.shape
    _, bs, H_kv, _ = k_cache.shape
    assert H_q % H_kv == 0 and k_cache.stride() == v_cache.stride()
    if q.stride(2) != 1:
        q = q.contiguous()
    block_n = block_n or 64
    if num_splits is None:
        num_splits = default_num_splits(B, H_kv, block_tables.shape[1] * bs, q.device, block_n)
    if out is None:
        out = torch.empty_like(q, memory_format=torch.contiguous_format)
    if scratch is None:
        scratch = decode_scratch(B, H_q, D, num_splits, q.device)
    po, pm, pl = scratch
    assert po.shape == (B, H_q, num_splits, D) and po.is_contiguous() and out.stride(2) == 1
    if B == 0:
        return out
    G = H_q // H_kv
    d_pad = max(16, next_pow2(D))
    _decode_split_kernel[(B, H_kv, num_splits)](
        q, k_cache, v_cache, block_tables, context_lens, po, pm, pl, scale * LOG2E,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        block_tables.stride(0), H_q, G, D, num_splits,
        BLOCK_SIZE=bs, BLOCK_N=block_n, G_PAD=max(16, next_pow2(G)), D_PAD=d_pad,
        DOT_PREC=dot_precision(k_cache.dtype),
        DOT_DTYPE=dot_dtype(k_cache.dtype), num_warps=4, num_stages=2)
    _decode_merge_kernel[(B, H_q)](
        po, pm, pl, out, out.stride(0), out.stride(1), H_q, D, num_splits,
        S_PAD=max(2, next_pow2(num_splits)), D_PAD=d_pad, num_warps=1 if d_pad <= 128 else 2)
    return out


def paged_decode_attention_reference(q, k_cache, v_cache, block_tables, context_lens, scale,
                                     out=None, **_):
    """PyTorch reference, batched: gather every request's keys, masked fp32 softmax.

    It is also the CPU path of the engine, hence one gather for the whole batch rather than
    a Python loop per request. Syncs once (the longest context): not CUDA-graph safe.
    """
    B, H_q, D = q.shape
    bs, H_kv = k_cache.shape[1], k_cache.shape[2]
    G = H_q // H_kv
    res = torch.zeros_like(q) if out is None else out.zero_()
    width = math.ceil(int(context_lens.max()) / bs) if B else 0
    if width == 0:
        return res
    pages = block_tables[:, :width].long().clamp(min=0)  # padding is masked below, never used
    k = k_cache[pages].reshape(B, width * bs, H_kv, D).float()
    v = v_cache[pages].reshape(B, width * bs, H_kv, D).float()
    scores = torch.einsum("bkgd,bnkd->bkgn", q.float().view(B, H_kv, G, D) * scale, k)
    valid = torch.arange(width * bs, device=q.device)[None, :] < context_lens[:, None].long()
    scores = scores.masked_fill(~valid[:, None, None, :], float("-inf"))
    probs = torch.nan_to_num(scores.softmax(-1), nan=0.0)  # rows with no keys -> zeros
    v = v.masked_fill(~valid[:, :, None, None], 0.0)  # slots past the context may hold anything
    res.copy_(torch.einsum("bkgn,bnkd->bkgd", probs, v).reshape(B, H_q, D))
    return res
