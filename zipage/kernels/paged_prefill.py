"""Paged prefill attention over packed variable-length queries (flash-attention tiling).

Grid (query tiles, sequences, H_q). A program takes BLOCK_M query rows of one sequence and
one query head, walks the sequence's keys in BLOCK_N tiles through the block table with an
online softmax in fp32, and stops at the last key visible to its last row. Query i of a
sequence with q_len new tokens and ctx keys sees keys [0, ctx - q_len + i]: this single
bottom-right-aligned causal rule covers plain prefill, chunked prefill and prefix hits.
"""
import torch

from zipage.kernels._dispatch import (INTERPRET, cdiv, dot_dtype, dot_precision, next_pow2, tl,
                                      triton, use_triton)

LOG2E = 1.4426950408889634


@triton.jit
def _prefill_kernel(Q, K, V, BT, CU, CTX, OUT, qk_scale,
                    stride_qt, stride_qh, stride_ot, stride_oh,
                    stride_kb, stride_kt, stride_kh, stride_bt, G, D,
                    BLOCK_SIZE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    D_PAD: tl.constexpr, DOT_PREC: tl.constexpr,
                    DOT_DTYPE: tl.constexpr):
    # last query tiles have the most keys: launch them first for better tail balance
    mt = tl.num_programs(0) - 1 - tl.program_id(0)
    seq = tl.program_id(1)
    h = tl.program_id(2)
    kvh = h // G
    q_start = tl.load(CU + seq)
    q_len = tl.load(CU + seq + 1) - q_start
    ctx = tl.load(CTX + seq)
    prefix = ctx - q_len  # keys before the first new token

    rows = mt * BLOCK_M + tl.arange(0, BLOCK_M)
    d = tl.arange(0, D_PAD)
    row_ok = rows < q_len
    d_ok = d < D
    tok_q = (q_start + rows).to(tl.int64)
    q = tl.load(Q + tok_q[:, None] * stride_qt + h * stride_qh + d[None, :],
                mask=row_ok[:, None] & d_ok[None, :], other=0.0)
    q = q.to(DOT_DTYPE)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D_PAD], tl.float32)
    offs_n = tl.arange(0, BLOCK_N)
    bt_row = BT + seq.to(tl.int64) * stride_bt
    # keys seen by the tile's last row; 0 for tiles past this sequence's end
    hi = tl.minimum(ctx, prefix + (mt + 1) * BLOCK_M)
    hi = tl.where(mt * BLOCK_M < q_len, hi, 0)
    for start in range(0, hi, BLOCK_N):
        tok = start + offs_n
        valid = tok < ctx
        page = tl.load(bt_row + tok // BLOCK_SIZE, mask=valid, other=0).to(tl.int64)
        kv_off = (page[:, None] * stride_kb + (tok % BLOCK_SIZE)[:, None] * stride_kt
                  + kvh * stride_kh + d[None, :])
        kv_mask = valid[:, None] & d_ok[None, :]
        k = tl.load(K + kv_off, mask=kv_mask, other=0.0).to(DOT_DTYPE)
        s = tl.dot(q, tl.trans(k), input_precision=DOT_PREC) * qk_scale  # log2 domain
        vis = (tok[None, :] <= prefix + rows[:, None]) & valid[None, :]
        s = tl.where(vis, s, float("-inf"))
        # key 0 is visible to every row, so m_i is finite after the first tile
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + kv_off, mask=kv_mask, other=0.0).to(DOT_DTYPE)
        acc = acc * alpha[:, None] + tl.dot(p.to(DOT_DTYPE), v, input_precision=DOT_PREC)
        m_i = m_new

    o = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]
    tl.store(OUT + tok_q[:, None] * stride_ot + h * stride_oh + d[None, :],
             o.to(OUT.dtype.element_ty), mask=row_ok[:, None] & d_ok[None, :])


def _config(d_pad: int):
    """(BLOCK_M, BLOCK_N, num_warps, num_stages); small tiles keep the interpreter quick."""
    if INTERPRET:
        return 16, 16, 4, 1
    if d_pad <= 128:
        return 128, 64, 8, 2
    return 64, 32, 4, 2


def paged_prefill_attention(q, k_cache, v_cache, block_tables, cu_seqlens_q, context_lens,
                            max_q_len, scale, out=None, block_m=None, block_n=None):
    """Causal attention of packed new tokens over their sequences' paged K/V.

    q:            (T, H_q, D) packed; unit stride on D.
    k/v_cache:    (NB, b, H_kv, D), same strides, already holding the new tokens' K/V;
                  any b (powers of two tested), H_q % H_kv == 0.
    block_tables: int32 (S, max_blocks), padded with -1 (padding is never read).
    cu_seqlens_q: int32 (S + 1,); sequence s owns q rows cu[s]:cu[s+1] (q_len_s).
    context_lens: int32 (S,), keys of s incl. the new ones (>= q_len_s).
    max_q_len:    int, >= every q_len_s (sets the grid; no host sync).
    out:          optional (T, H_q, D) buffer. Returns (T, H_q, D) in q.dtype; query i of s
                  sees keys [0, context_lens[s] - q_len_s + i].
    """
    if not use_triton(q):
        return paged_prefill_attention_reference(q, k_cache, v_cache, block_tables,
                                                 cu_seqlens_q, context_lens, max_q_len,
                                                 scale, out=out)
    T, H_q, D = q.shape
    bs, H_kv = k_cache.shape[1], k_cache.shape[2]
    assert H_q % H_kv == 0 and k_cache.stride() == v_cache.stride()
    if q.stride(2) != 1:
        q = q.contiguous()
    if out is None:
        out = torch.empty_like(q, memory_format=torch.contiguous_format)
    assert out.shape == q.shape and out.stride(2) == 1
    num_seqs = context_lens.shape[0]
    if T == 0 or num_seqs == 0 or max_q_len == 0:
        return out
    d_pad = max(16, next_pow2(D))
    bm, bn, warps, stages = _config(d_pad)
    bm, bn = block_m or bm, block_n or bn
    _prefill_kernel[(cdiv(max_q_len, bm), num_seqs, H_q)](
        q, k_cache, v_cache, block_tables, cu_seqlens_q, context_lens, out, scale * LOG2E,
        q.stride(0), q.stride(1), out.stride(0), out.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), block_tables.stride(0),
        H_q // H_kv, D, BLOCK_SIZE=bs, BLOCK_M=bm, BLOCK_N=bn, D_PAD=d_pad,
        DOT_PREC=dot_precision(k_cache.dtype),
        DOT_DTYPE=dot_dtype(k_cache.dtype), num_warps=warps, num_stages=stages)
    return out


def paged_prefill_attention_reference(q, k_cache, v_cache, block_tables, cu_seqlens_q,
                                      context_lens, max_q_len=None, scale=1.0, out=None):
    """PyTorch reference: per sequence, gather keys, bottom-right causal mask, fp32 softmax."""
    bs, H_kv = k_cache.shape[1], k_cache.shape[2]
    G = q.shape[1] // H_kv
    res = torch.zeros_like(q) if out is None else out.zero_()
    cu, ctx = cu_seqlens_q.tolist(), context_lens.tolist()
    for s, n in enumerate(ctx):
        lo, hi = cu[s], cu[s + 1]
        L = hi - lo
        if L == 0 or n == 0:
            continue
        blocks = block_tables[s, : -(-n // bs)].long()
        k = k_cache[blocks].flatten(0, 1)[:n].float().repeat_interleave(G, 1)  # (n, H_q, D)
        v = v_cache[blocks].flatten(0, 1)[:n].float().repeat_interleave(G, 1)
        scores = torch.einsum("ihd,jhd->hij", q[lo:hi].float() * scale, k)
        i = torch.arange(L, device=q.device)[:, None]
        j = torch.arange(n, device=q.device)[None, :]
        scores.masked_fill_(j > n - L + i, float("-inf"))
        res[lo:hi] = torch.einsum("hij,jhd->ihd", scores.softmax(-1), v).to(res.dtype)
    return res
