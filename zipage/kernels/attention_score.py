"""Attention score of the observation window over a request's paged keys (method spec §5.1).

    A[l, s, h, j] = (1/W) sum_r max_{g in group(h)} softmax_j(q[l, slot_s, r, g] . k_j / sqrt(D))

with causal masking inside the window (the query of physical index i sees keys j <= i) and
keys j >= phys_len invalid. All math in fp32. One program per (KV head, request, layer) holds
the G*W window queries of its group in one tile and makes two passes over the keys: softmax
statistics first (online max / sum), then normalised probabilities reduced over the group
(max) and the window (mean). Unlike the reference, no (W, n) logits buffer is materialised.
"""
import math

import torch

from zipage.kernels._dispatch import dot_precision, next_pow2, tl, triton
from zipage.kernels.compression_common import (UPCAST_DOTS, check_tables, dot_f32,
                                            gather_positions)

_BLOCK_N = 64  # keys per tile


@triton.jit
def _window_logits(q, k_ptr, tables, s, st_b, l, h, sk_l, sk_nb, sk_b, sk_h, start, n, qpos,
                   row_ok, scale_log2, D, b: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_D: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr):
    """Masked logits (log2 units) of the window rows against keys start..start+BLOCK_N."""
    j = start + tl.arange(0, BLOCK_N)
    d = tl.arange(0, BLOCK_D)
    j_ok = j < n
    blk = tl.load(tables + s * st_b + j // b, mask=j_ok, other=0).to(tl.int64)
    k_off = l * sk_l + blk * sk_nb + (j % b) * sk_b + h * sk_h
    k = tl.load(k_ptr + k_off[:, None] + d[None, :], mask=j_ok[:, None] & (d[None, :] < D),
                other=0.0)
    z = dot_f32(q, tl.trans(k), PRECISION, UPCAST) * scale_log2
    visible = row_ok[:, None] & j_ok[None, :] & (j[None, :] <= qpos[:, None])
    return tl.where(visible, z, float("-inf"))


# batch size and table width change from step to step: one compiled variant serves all
@triton.jit(do_not_specialize=["st_b"])
def _attention_score_kernel(q_ptr, k_ptr, out_ptr, slots, tables, phys_lens, window_pos,
                            sq_l, sq_m, sq_w, sq_h, sk_l, sk_nb, sk_b, sk_h, so_l, so_b, so_h,
                            st_b, swp_b, scale_log2, W, D, b: tl.constexpr, G: tl.constexpr,
                            GP: tl.constexpr, WP: tl.constexpr, BLOCK_N: tl.constexpr,
                            BLOCK_D: tl.constexpr, PRECISION: tl.constexpr,
                            UPCAST: tl.constexpr):
    h = tl.program_id(0)
    s = tl.program_id(1)
    l = tl.program_id(2).to(tl.int64)  # int64: layer offsets exceed 2**31 elements
    n = tl.load(phys_lens + s)
    slot = tl.load(slots + s).to(tl.int64)
    rows = tl.arange(0, GP * WP)  # row = g * WP + r: reshapes to (GP, WP, .) for the reductions
    g, r = rows // WP, rows % WP
    row_ok = (g < G) & (r < W)
    qpos = tl.load(window_pos + s * swp_b + r, mask=row_ok, other=-1)
    d = tl.arange(0, BLOCK_D)
    q_off = l * sq_l + slot * sq_m + r * sq_w + (h * G + g) * sq_h
    q = tl.load(q_ptr + q_off[:, None] + d[None, :], mask=row_ok[:, None] & (d[None, :] < D),
                other=0.0)
    # pass 1: softmax statistics; finite initial max keeps padded (all -inf) rows NaN-free
    m_i = tl.full([GP * WP], -1e30, tl.float32)
    l_i = tl.zeros([GP * WP], tl.float32)
    for start in range(0, n, BLOCK_N):
        z = _window_logits(q, k_ptr, tables, s, st_b, l, h, sk_l, sk_nb, sk_b, sk_h, start, n,
                           qpos, row_ok, scale_log2, D, b, BLOCK_N, BLOCK_D, PRECISION,
                           UPCAST)
        m_new = tl.maximum(m_i, tl.max(z, 1))
        l_i = l_i * tl.exp2(m_i - m_new) + tl.sum(tl.exp2(z - m_new[:, None]), 1)
        m_i = m_new
    inv_l = 1.0 / tl.where(l_i > 0, l_i, 1.0)  # padded rows: l_i = 0 and p = 0 anyway
    # pass 2: probabilities, max over the group, mean over the window
    out_base = out_ptr + l * so_l + s * so_b + h * so_h
    for start in range(0, n, BLOCK_N):
        z = _window_logits(q, k_ptr, tables, s, st_b, l, h, sk_l, sk_nb, sk_b, sk_h, start, n,
                           qpos, row_ok, scale_log2, D, b, BLOCK_N, BLOCK_D, PRECISION,
                           UPCAST)
        p = tl.exp2(z - m_i[:, None]) * inv_l[:, None]
        a = tl.sum(tl.max(tl.reshape(p, (GP, WP, BLOCK_N)), 0), 0) / W
        j = start + tl.arange(0, BLOCK_N)
        tl.store(out_base + j, a, mask=j < n)


def attention_score(k_cache, query_cache, slots, block_tables, phys_lens, window_pos):
    """Window attention score of every physical slot (Triton).

    k_cache:      (L, NB, b, H_kv, D), last dim contiguous (a layer-chunk view is fine)
    query_cache:  (L, M, W, H_q, D), same dtype as k_cache, H_q % H_kv == 0
    slots:        int32 (B,) query slot of each request
    block_tables: int32 (B, n_max), -1 padded
    phys_lens:    int32 (B,) valid physical tokens
    window_pos:   int32 (B, W) physical index of the token whose query is at ring index w
    returns       float32 (L, B, H_kv, n_max * b); 0 at slots >= phys_len
    """
    L, NB, b, H, D = k_cache.shape
    W, Hq = query_cache.shape[2], query_cache.shape[3]
    check_tables(block_tables, phys_lens)
    assert k_cache.stride(-1) == 1 and query_cache.stride(-1) == 1
    assert query_cache.dtype == k_cache.dtype and Hq % H == 0
    B, n_max = block_tables.shape
    out = torch.zeros(L, B, H, n_max * b, dtype=torch.float32, device=k_cache.device)
    G = Hq // H
    GP, WP = next_pow2(G), next_pow2(W)
    WP = max(WP, 16 // GP)  # tl.dot needs >= 16 rows
    _attention_score_kernel[(H, B, L)](
        query_cache, k_cache, out, slots, block_tables, phys_lens, window_pos,
        *query_cache.stride()[:4], *k_cache.stride()[:4], *out.stride()[:3],
        block_tables.stride(0), window_pos.stride(0), D ** -0.5 * math.log2(math.e), W, D,
        b=b, G=G, GP=GP, WP=WP, BLOCK_N=_BLOCK_N, BLOCK_D=max(16, next_pow2(D)),
        PRECISION=dot_precision(k_cache.dtype), UPCAST=UPCAST_DOTS, num_warps=4)
    return out


def attention_score_reference(k_cache, query_cache, slots, block_tables, phys_lens, window_pos):
    """PyTorch version of attention_score (one request at a time, fp32)."""
    L, NB, b, H, D = k_cache.shape
    W, Hq = query_cache.shape[2], query_cache.shape[3]
    B, n_max = block_tables.shape
    out = torch.zeros(L, B, H, n_max * b, dtype=torch.float32, device=k_cache.device)
    for s in range(B):
        n = int(phys_lens[s])
        k = gather_positions(k_cache, block_tables[s], n).float()  # (L, n, H, D)
        q = query_cache[:, int(slots[s])].float().view(L, W, H, Hq // H, D)
        z = torch.einsum("lwhgd,lnhd->lhgwn", q, k) * D ** -0.5
        visible = torch.arange(n, device=k.device)[None, :] <= window_pos[s, :, None]  # (W, n)
        p = z.masked_fill(~visible, float("-inf")).softmax(-1)
        out[:, s, :, :n] = p.amax(2).mean(2)
    return out
