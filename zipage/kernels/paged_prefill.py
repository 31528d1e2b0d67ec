"""Paged prefill attention over packed variable-length queries (flash-attention tiling).

Grid (query tiles, sequences, H_kv). GQA packing: a program takes TILE_M rows of one
sequence and one KV head, where row r is query token r // G of the tile's range and query
head kv_head * G + r % G, so the G heads that share a KV head read each K/V tile once. It
walks the sequence's keys in TILE_N tiles through the block table with an online softmax in
fp32 and stops at the last key visible to its last row. Query i of a sequence with q_len new
tokens and ctx keys sees keys [0, ctx - q_len + i]: this single bottom-right-aligned causal
rule covers plain prefill, chunked prefill and prefix hits. Key tiles visible to every row
of the program skip the causal mask; only the tiles along the diagonal apply it.
"""
from dataclasses import replace

import torch

from zipage.kernels._dispatch import INTERPRET, cdiv, next_pow2, tl, triton, use_triton
from zipage.kernels.fp8 import check_scales, dequantize_reference, v_layout
from zipage.kernels.fp8_launch import (FP8_PREFILL, Launch, check_no_fp8_options, check_v_path,
                                       resolve_launch)
from zipage.kernels.fp8_tiles import attend_tiles
from zipage.kernels.paged_tiles import LOG2E, dot_args, dot_operand


@triton.jit(do_not_specialize=["stride_table_row"])
def _prefill_kernel(q_ptr, k_cache_ptr, v_cache_ptr, k_scale_ptr, v_scale_ptr,
                    block_tables_ptr, cu_seqlens_q_ptr,
                    context_lens_ptr, out_ptr, qk_scale, stride_q_token, stride_q_head,
                    stride_out_token, stride_out_head, stride_k_block, stride_k_slot,
                    stride_k_head, stride_v_head, stride_table_row, GROUP: tl.constexpr,
                    HEAD_DIM: tl.constexpr, BLOCK_SIZE: tl.constexpr, TILE_M: tl.constexpr,
                    TILE_N: tl.constexpr, HEAD_DIM_PAD: tl.constexpr,
                    DOT_DTYPE: tl.constexpr, DOT_PREC: tl.constexpr, QUANT: tl.constexpr,
                    V_IN_REGISTERS: tl.constexpr, V_T: tl.constexpr):
    # last query tiles have the most keys: launch them first for better tail balance
    tile = tl.num_programs(0) - 1 - tl.program_id(0)
    seq = tl.program_id(1)
    kv_head = tl.program_id(2)
    q_start = tl.load(cu_seqlens_q_ptr + seq)
    q_len = tl.load(cu_seqlens_q_ptr + seq + 1) - q_start
    ctx = tl.load(context_lens_ptr + seq)
    prefix = ctx - q_len  # keys before the first new token

    rows = tile * TILE_M + tl.arange(0, TILE_M)
    query = rows // GROUP  # query token of each row, within the sequence
    head = kv_head * GROUP + rows % GROUP
    cols = tl.arange(0, HEAD_DIM_PAD)
    row_ok = query < q_len
    io_mask = row_ok[:, None] & (cols[None, :] < HEAD_DIM)
    token = (q_start + query).to(tl.int64)
    q = tl.load(q_ptr + token[:, None] * stride_q_token + head[:, None] * stride_q_head
                + cols[None, :], mask=io_mask, other=0.0)
    q = dot_operand(q, DOT_DTYPE)

    m_i = tl.full([TILE_M], float("-inf"), tl.float32)
    l_i = tl.zeros([TILE_M], tl.float32)
    acc = tl.zeros([TILE_M, HEAD_DIM_PAD], tl.float32)
    last_key = tl.minimum(prefix + query, ctx - 1)  # rows past q_len: any finite choice
    first_query = tile * TILE_M // GROUP
    last_query = ((tile + 1) * TILE_M - 1) // GROUP
    active = first_query < q_len  # tiles past this sequence's end do nothing
    # keys [0, full_end) are visible to every row; [full_end, key_end) need the causal mask
    key_end = tl.where(active, tl.minimum(ctx, prefix + last_query + 1), 0)
    full_end = tl.where(active, (prefix + first_query + 1) // TILE_N * TILE_N, 0)
    table_row = block_tables_ptr + seq.to(tl.int64) * stride_table_row
    head_offset = kv_head * stride_k_head
    v_head_offset = kv_head * stride_v_head
    m_i, l_i, acc = attend_tiles(
        q, m_i, l_i, acc, k_cache_ptr, v_cache_ptr, k_scale_ptr, v_scale_ptr, table_row,
        head_offset, v_head_offset, stride_k_block, stride_k_slot, 0, full_end, last_key,
        qk_scale, False, BLOCK_SIZE, TILE_N, HEAD_DIM, HEAD_DIM_PAD, DOT_DTYPE, DOT_PREC, QUANT,
        V_IN_REGISTERS, V_T)
    m_i, l_i, acc = attend_tiles(
        q, m_i, l_i, acc, k_cache_ptr, v_cache_ptr, k_scale_ptr, v_scale_ptr, table_row,
        head_offset, v_head_offset, stride_k_block, stride_k_slot, full_end, key_end, last_key,
        qk_scale, True, BLOCK_SIZE, TILE_N, HEAD_DIM, HEAD_DIM_PAD, DOT_DTYPE, DOT_PREC, QUANT,
        V_IN_REGISTERS, V_T)

    o = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]
    tl.store(out_ptr + token[:, None] * stride_out_token + head[:, None] * stride_out_head
             + cols[None, :], o.to(out_ptr.dtype.element_ty), mask=io_mask)


def _launch(head_dim_pad: int, quant: bool, q_dtype, cache_dtype, fp8_operand,
            **overrides) -> Launch:
    """The launch: the default for the head dim and cache (small tiles keep the interpreter
    quick) with the caller's non-None overrides (tile_m, tile_n, num_warps, num_stages,
    v_in_registers)."""
    if quant:
        operand = resolve_launch(FP8_PREFILL, q_dtype, fp8_operand).operand
    else:
        check_no_fp8_options(cache_dtype, fp8_operand=fp8_operand,
                             fp8_v_in_registers=overrides.pop("v_in_registers", None))
        operand = cache_dtype
    if INTERPRET:
        default = Launch(operand, tile_m=16, tile_n=16, num_warps=4, num_stages=1)
    elif operand == torch.float32:  # exact fp32 dots run on FMA units: small tiles spill less
        default = Launch(operand, tile_m=64, tile_n=32, num_warps=8, num_stages=2)
    elif head_dim_pad <= 128:
        default = replace(FP8_PREFILL, operand=operand) if quant else \
            Launch(operand, tile_m=128, tile_n=64, num_warps=8, num_stages=2)
    else:
        default = Launch(operand, tile_m=64, tile_n=32, num_warps=4, num_stages=2)
    return resolve_launch(default, q_dtype, operand, **overrides)


def paged_prefill_attention(q, k_cache, v_cache, block_tables, cu_seqlens_q, context_lens,
                            max_q_len, scale, out=None, tile_m=None, tile_n=None,
                            num_warps=None, num_stages=None, k_scale=None, v_scale=None,
                            fp8_operand=None, fp8_v_in_registers=None):
    """Causal attention of packed new tokens over their sequences' paged K/V.

    q:            (T, H_q, D) packed; unit stride on D.
    k/v_cache:    (NB, b, H_kv, D), same strides (an fp8 V cache may be
                  fp8.transposed_v_view's), already holding the new tokens' K/V;
                  any b (powers of two tested), H_q % H_kv == 0.
    block_tables: int32 (S, max_blocks), padded with -1 (padding is never read).
    cu_seqlens_q: int32 (S + 1,); sequence s owns q rows cu[s]:cu[s+1] (q_len_s).
    context_lens: int32 (S,), keys of s incl. the new ones (>= q_len_s).
    max_q_len:    int, >= every q_len_s (sets the grid; no host sync).
    out:          optional (T, H_q, D) buffer. Returns (T, H_q, D) in q.dtype; query i of s
                  sees keys [0, context_lens[s] - q_len_s + i].
    tile_m, tile_n, num_warps, num_stages: launch overrides (benchmarks, tests); a tile
                  holds tile_m (query, head) rows, tile_m // G query tokens.
    k/v_scale:    float32 (NB, b, H_kv) for an fp8 cache, else None.
    fp8_operand:  dot operand type of an fp8 cache's tiles (fp8_launch.py); None: default.
    fp8_v_in_registers: an fp8 cache's V operand made in registers (True) or read as bytes
                  with the weights on P (False); None: the default (fp8_launch.py).
    """
    if not use_triton(q):
        return paged_prefill_attention_reference(q, k_cache, v_cache, block_tables,
                                                 cu_seqlens_q, context_lens, max_q_len,
                                                 scale, out=out, k_scale=k_scale,
                                                 v_scale=v_scale)
    quant = check_scales(k_cache, k_scale) | check_scales(v_cache, v_scale)
    T, H_q, D = q.shape
    bs, H_kv = k_cache.shape[1], k_cache.shape[2]
    assert H_q % H_kv == 0
    v_transposed, stride_v_head = v_layout(k_cache, v_cache)
    check_v_path(v_transposed, fp8_v_in_registers)
    if q.stride(2) != 1:
        q = q.contiguous()
    if out is None:
        out = torch.empty_like(q, memory_format=torch.contiguous_format)
    assert out.shape == q.shape and out.stride(2) == 1
    num_seqs = context_lens.shape[0]
    if T == 0 or num_seqs == 0 or max_q_len == 0:
        return out
    d_pad = max(16, next_pow2(D))
    launch = _launch(d_pad, quant, q.dtype, k_cache.dtype, fp8_operand, tile_m=tile_m,
                     tile_n=tile_n, num_warps=num_warps, num_stages=num_stages,
                     v_in_registers=fp8_v_in_registers)
    group = H_q // H_kv
    _prefill_kernel[(cdiv(max_q_len * group, launch.tile_m), num_seqs, H_kv)](
        q, k_cache, v_cache, k_scale if quant else k_cache, v_scale if quant else v_cache,
        block_tables, cu_seqlens_q, context_lens, out, scale * LOG2E,
        q.stride(0), q.stride(1), out.stride(0), out.stride(1), k_cache.stride(0),
        k_cache.stride(1), k_cache.stride(2), stride_v_head, block_tables.stride(0), GROUP=group,
        HEAD_DIM=D, BLOCK_SIZE=bs, TILE_M=launch.tile_m, TILE_N=launch.tile_n,
        HEAD_DIM_PAD=d_pad, **dot_args(launch.operand), QUANT=quant,
        V_IN_REGISTERS=launch.v_in_registers and not v_transposed, V_T=v_transposed,
        num_warps=launch.num_warps, num_stages=launch.num_stages)
    return out


def paged_prefill_attention_reference(q, k_cache, v_cache, block_tables, cu_seqlens_q,
                                      context_lens, max_q_len=None, scale=1.0, out=None,
                                      k_scale=None, v_scale=None):
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
        k, v = (dequantize_reference(c[blocks], None if sc is None else sc[blocks])
                .flatten(0, 1)[:n].repeat_interleave(G, 1)  # (n, H_q, D)
                for c, sc in ((k_cache, k_scale), (v_cache, v_scale)))
        scores = torch.einsum("ihd,jhd->hij", q[lo:hi].float() * scale, k)
        i = torch.arange(L, device=q.device)[:, None]
        j = torch.arange(n, device=q.device)[None, :]
        scores.masked_fill_(j > n - L + i, float("-inf"))
        res[lo:hi] = torch.einsum("hij,jhd->ihd", scores.softmax(-1), v).to(res.dtype)
    return res
