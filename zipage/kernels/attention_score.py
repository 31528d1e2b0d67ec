"""Attention score of the observation window over a request's paged keys (docs/method.md §6.1).

    A[l, s, h, j] = (1/W) sum_r max_{g in group(h)} softmax_j(q[l, slot_s, r, g] . k_j / sqrt(D))

with causal masking inside the window (the query of physical index i sees keys j <= i) and
keys j >= phys_len invalid. All math in fp32. One program per (KV head, request, layer) holds
the G*W window queries of its group in one tile and makes two passes over the keys: softmax
statistics first (online max / sum), then normalised probabilities reduced over the group
(max) and the window (mean). Unlike the reference, no (W, n) logits buffer is materialised.
"""
import torch

from zipage.kernels._dispatch import next_pow2, tl, triton
from zipage.kernels.block_tables import check_tables, gather_positions
from zipage.kernels.fp8 import check_scales, dequantize_reference
from zipage.kernels.fp8_launch import FP8_SCORE, Launch, launch_for
from zipage.kernels.fp8_tiles import fp8_scores, load_fp8_tile
from zipage.kernels.paged_tiles import (LOG2E, dot_args, dot_operand, load_kv_tile,
                                        online_softmax_step, paged_offsets)

# launch of a full-precision cache (operand: the cache dtype); FP8: fp8_launch.FP8_SCORE
_SCORE = Launch(torch.bfloat16, tile_n=64, num_warps=4, num_stages=3)  # Triton's default


@triton.jit
def _window_logits(q, k_cache_ptr, k_scale_ptr, table_row_ptr, head_offset, stride_k_block,
                   stride_k_slot, start, n, last_key, qk_scale, BLOCK_SIZE: tl.constexpr,
                   TILE_N: tl.constexpr, HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr,
                   DOT_DTYPE: tl.constexpr, DOT_PREC: tl.constexpr, QUANT: tl.constexpr):
    """Masked logits (log2 units) of the window rows against keys start..start+TILE_N."""
    keys = start + tl.arange(0, TILE_N)
    key_ok = keys < n
    offsets = head_offset + paged_offsets(table_row_ptr, keys, key_ok, stride_k_block,
                                          stride_k_slot, BLOCK_SIZE)
    if QUANT:  # e4m3 keys as they are; each key's scale multiplies its column of logits
        k, k_scale = load_fp8_tile(k_cache_ptr, k_scale_ptr, offsets, key_ok, True, HEAD_DIM,
                                   HEAD_DIM_PAD)
        z = fp8_scores(q, k, k_scale, qk_scale, DOT_DTYPE, DOT_PREC)
    else:
        k = dot_operand(load_kv_tile(k_cache_ptr, offsets, key_ok, HEAD_DIM, HEAD_DIM_PAD),
                        DOT_DTYPE)
        z = tl.dot(q, tl.trans(k), input_precision=DOT_PREC) * qk_scale
    visible = key_ok[None, :] & (keys[None, :] <= last_key[:, None])  # padded rows: -1
    return tl.where(visible, z, float("-inf"))


@triton.jit(do_not_specialize=["stride_table_row"])
def _attention_score_kernel(query_cache_ptr, k_cache_ptr, k_scale_ptr, out_ptr, slots_ptr,
                            block_tables_ptr, phys_lens_ptr, window_pos_ptr, stride_q_layer,
                            stride_q_slot, stride_q_window, stride_q_head, stride_k_layer,
                            stride_k_block, stride_k_slot, stride_k_head, stride_out_layer,
                            stride_out_req, stride_out_head, stride_table_row,
                            stride_window_row, qk_scale, window, HEAD_DIM: tl.constexpr,
                            BLOCK_SIZE: tl.constexpr, GROUP: tl.constexpr,
                            GROUP_PAD: tl.constexpr, WINDOW_PAD: tl.constexpr,
                            TILE_N: tl.constexpr, HEAD_DIM_PAD: tl.constexpr,
                            DOT_DTYPE: tl.constexpr, DOT_PREC: tl.constexpr,
                            QUANT: tl.constexpr):
    kv_head = tl.program_id(0)
    req = tl.program_id(1)
    layer = tl.program_id(2).to(tl.int64)  # int64: layer offsets exceed 2**31 elements
    n = tl.load(phys_lens_ptr + req)
    slot = tl.load(slots_ptr + req).to(tl.int64)
    # row = g * WINDOW_PAD + r: reshapes to (GROUP_PAD, WINDOW_PAD, .) for the reductions
    rows = tl.arange(0, GROUP_PAD * WINDOW_PAD)
    g, r = rows // WINDOW_PAD, rows % WINDOW_PAD
    row_ok = (g < GROUP) & (r < window)
    last_key = tl.load(window_pos_ptr + req * stride_window_row + r, mask=row_ok, other=-1)
    cols = tl.arange(0, HEAD_DIM_PAD)
    q_off = (layer * stride_q_layer + slot * stride_q_slot + r * stride_q_window
             + (kv_head * GROUP + g) * stride_q_head)
    q = tl.load(query_cache_ptr + q_off[:, None] + cols[None, :],
                mask=row_ok[:, None] & (cols[None, :] < HEAD_DIM), other=0.0)
    q = dot_operand(q, DOT_DTYPE)
    table_row = block_tables_ptr + req * stride_table_row
    head_offset = layer * stride_k_layer + kv_head * stride_k_head
    # pass 1: softmax statistics; finite initial max keeps padded (all -inf) rows NaN-free
    m_i = tl.full([GROUP_PAD * WINDOW_PAD], -1e30, tl.float32)
    l_i = tl.zeros([GROUP_PAD * WINDOW_PAD], tl.float32)
    for start in range(0, n, TILE_N):
        z = _window_logits(q, k_cache_ptr, k_scale_ptr, table_row, head_offset,
                           stride_k_block, stride_k_slot, start, n, last_key, qk_scale,
                           BLOCK_SIZE, TILE_N, HEAD_DIM, HEAD_DIM_PAD, DOT_DTYPE, DOT_PREC,
                           QUANT)
        m_i, l_i, _, _ = online_softmax_step(m_i, l_i, z)
    inv_l = 1.0 / tl.where(l_i > 0, l_i, 1.0)  # padded rows: l_i = 0 and p = 0 anyway
    # pass 2: probabilities, max over the group, mean over the window
    out_row = (out_ptr + layer * stride_out_layer + req * stride_out_req
               + kv_head * stride_out_head)
    for start in range(0, n, TILE_N):
        z = _window_logits(q, k_cache_ptr, k_scale_ptr, table_row, head_offset,
                           stride_k_block, stride_k_slot, start, n, last_key, qk_scale,
                           BLOCK_SIZE, TILE_N, HEAD_DIM, HEAD_DIM_PAD, DOT_DTYPE, DOT_PREC,
                           QUANT)
        p = tl.exp2(z - m_i[:, None]) * inv_l[:, None]
        a = tl.sum(tl.max(tl.reshape(p, (GROUP_PAD, WINDOW_PAD, TILE_N)), 0), 0) / window
        keys = start + tl.arange(0, TILE_N)
        tl.store(out_row + keys, a, mask=keys < n)


def attention_score(k_cache, query_cache, slots, block_tables, phys_lens, window_pos,
                    k_scale=None, tile_n=None, num_warps=None, num_stages=None,
                    fp8_operand=None):
    """Window attention score of every physical slot (Triton).

    k_cache:      (L, NB, b, H_kv, D), last dim contiguous (a layer-chunk view is fine)
    query_cache:  (L, M, W, H_q, D), k_cache's dtype (the model dtype for an fp8 cache),
                  H_q % H_kv == 0
    slots:        int32 (B,) query slot of each request
    block_tables: int32 (B, n_max), -1 padded
    phys_lens:    int32 (B,) valid physical tokens
    window_pos:   int32 (B, W) physical index of the token whose query is at ring index w
    k_scale:      float32 (L, NB, b, H_kv) for an fp8 k_cache (fp8.py), else None
    tile_n, num_warps, num_stages, fp8_operand: launch overrides (fp8_launch.py; defaults
                  64 keys, 4 warps, 3 stages; an fp8 cache: fp8_launch.FP8_SCORE)
    returns       float32 (L, B, H_kv, n_max * b); 0 at slots >= phys_len
    """
    L, NB, b, H, D = k_cache.shape
    W, Hq = query_cache.shape[2], query_cache.shape[3]
    check_tables(block_tables, phys_lens)
    assert k_cache.stride(-1) == 1 and query_cache.stride(-1) == 1
    quant = check_scales(k_cache, k_scale)
    overrides = dict(tile_n=tile_n, num_warps=num_warps, num_stages=num_stages)
    launch = launch_for(quant, FP8_SCORE, _SCORE, query_cache.dtype, k_cache.dtype,
                        fp8_operand, **overrides)
    assert (quant or query_cache.dtype == k_cache.dtype) and Hq % H == 0
    B, n_max = block_tables.shape
    out = torch.zeros(L, B, H, n_max * b, dtype=torch.float32, device=k_cache.device)
    G = Hq // H
    group_pad, window_pad = next_pow2(G), next_pow2(W)
    window_pad = max(window_pad, 16 // group_pad)  # tl.dot needs >= 16 rows
    _attention_score_kernel[(H, B, L)](
        query_cache, k_cache, k_scale if quant else k_cache, out, slots, block_tables,
        phys_lens, window_pos,
        *query_cache.stride()[:4], *k_cache.stride()[:4], *out.stride()[:3],
        block_tables.stride(0), window_pos.stride(0), D ** -0.5 * LOG2E, W, HEAD_DIM=D,
        BLOCK_SIZE=b, GROUP=G, GROUP_PAD=group_pad, WINDOW_PAD=window_pad,
        TILE_N=launch.tile_n, HEAD_DIM_PAD=max(16, next_pow2(D)), **dot_args(launch.operand),
        QUANT=quant, num_warps=launch.num_warps, num_stages=launch.num_stages)
    return out


def attention_score_reference(k_cache, query_cache, slots, block_tables, phys_lens, window_pos,
                              k_scale=None):
    """PyTorch version of attention_score (one request at a time, fp32)."""
    L, NB, b, H, D = k_cache.shape
    W, Hq = query_cache.shape[2], query_cache.shape[3]
    B, n_max = block_tables.shape
    out = torch.zeros(L, B, H, n_max * b, dtype=torch.float32, device=k_cache.device)
    for s in range(B):
        n = int(phys_lens[s])
        k = dequantize_reference(gather_positions(k_cache, block_tables[s], n), None if
                                 k_scale is None else gather_positions(k_scale, block_tables[s], n))
        q = query_cache[:, int(slots[s])].float().view(L, W, H, Hq // H, D)
        z = torch.einsum("lwhgd,lnhd->lhgwn", q, k) * D ** -0.5
        visible = torch.arange(n, device=k.device)[None, :] <= window_pos[s, :, None]  # (W, n)
        p = z.masked_fill(~visible, float("-inf")).softmax(-1)
        out[:, s, :, :n] = p.amax(2).mean(2)
    return out
