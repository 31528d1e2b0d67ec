"""Kernel 1 of paged decode as a program per (request, KV head, split): the split kernel
(paged_decode.py's docstring describes the pair it forms with the merge kernel), and its
launch, which also launches fp8_decode_mma's e4m3 variant. An FP8 cache's default is the flat
kernel (fp8_decode_flat.py); this one runs where that cannot.
"""
from zipage.kernels._dispatch import next_pow2, tl, triton
from zipage.kernels.fp8 import FP8_DTYPE
from zipage.kernels.fp8_decode_mma import _split_e4m3_kernel, e4m3_group_pad
from zipage.kernels.fp8_tiles import attend_tiles
from zipage.kernels.paged_tiles import LOG2E, dot_args, dot_operand, split_key_range


@triton.jit(do_not_specialize=["stride_table_row", "num_splits"])
def _split_kernel(q_ptr, k_cache_ptr, v_cache_ptr, k_scale_ptr, v_scale_ptr,
                  block_tables_ptr, context_lens_ptr,
                  partial_out_ptr, partial_max_ptr, partial_sum_ptr, out_ptr, qk_scale,
                  stride_q_seq, stride_q_head, stride_k_block, stride_k_slot, stride_k_head,
                  stride_v_head, stride_table_row, stride_out_seq, stride_out_head, num_q_heads,
                  num_splits,
                  DIRECT: tl.constexpr, GROUP: tl.constexpr,
                  HEAD_DIM: tl.constexpr, BLOCK_SIZE: tl.constexpr, TILE_N: tl.constexpr,
                  GROUP_PAD: tl.constexpr, HEAD_DIM_PAD: tl.constexpr,
                  DOT_DTYPE: tl.constexpr, DOT_PREC: tl.constexpr, QUANT: tl.constexpr,
                  V_IN_REGISTERS: tl.constexpr, V_T: tl.constexpr):
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    ctx = tl.load(context_lens_ptr + seq)
    key_start, key_end, full_end = split_key_range(ctx, split, num_splits, TILE_N)

    g = tl.arange(0, GROUP_PAD)  # padded to >= 16 rows for tl.dot; extra rows are masked
    cols = tl.arange(0, HEAD_DIM_PAD)
    heads = kv_head * GROUP + g
    g_ok = g < GROUP
    q = tl.load(q_ptr + seq.to(tl.int64) * stride_q_seq + heads[:, None] * stride_q_head
                + cols[None, :], mask=g_ok[:, None] & (cols[None, :] < HEAD_DIM), other=0.0)
    q = dot_operand(q, DOT_DTYPE)

    m_i = tl.full([GROUP_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([GROUP_PAD], tl.float32)
    acc = tl.zeros([GROUP_PAD, HEAD_DIM_PAD], tl.float32)
    last_key = tl.zeros([GROUP_PAD], tl.int32) + ctx - 1  # every head sees the whole context
    table_row = block_tables_ptr + seq.to(tl.int64) * stride_table_row
    head_offset = kv_head * stride_k_head
    v_head_offset = kv_head * stride_v_head
    m_i, l_i, acc = attend_tiles(
        q, m_i, l_i, acc, k_cache_ptr, v_cache_ptr, k_scale_ptr, v_scale_ptr, table_row,
        head_offset, v_head_offset, stride_k_block, stride_k_slot, key_start, full_end,
        last_key, qk_scale, False, BLOCK_SIZE, TILE_N, HEAD_DIM, HEAD_DIM_PAD, DOT_DTYPE,
        DOT_PREC, QUANT, V_IN_REGISTERS, V_T)
    m_i, l_i, acc = attend_tiles(  # the context's partial last tile, if in this split
        q, m_i, l_i, acc, k_cache_ptr, v_cache_ptr, k_scale_ptr, v_scale_ptr, table_row,
        head_offset, v_head_offset, stride_k_block, stride_k_slot,
        tl.maximum(key_start, full_end), key_end, last_key, qk_scale, True, BLOCK_SIZE, TILE_N,
        HEAD_DIM, HEAD_DIM_PAD, DOT_DTYPE, DOT_PREC, QUANT, V_IN_REGISTERS, V_T)

    if DIRECT:  # the only split: normalise here (context_len 0 -> zeros, as the merge does)
        o = tl.where(l_i[:, None] > 0, acc / tl.where(l_i > 0, l_i, 1.0)[:, None], 0.0)
        tl.store(out_ptr + seq.to(tl.int64) * stride_out_seq + heads[:, None] * stride_out_head
                 + cols[None, :], o.to(out_ptr.dtype.element_ty),
                 mask=g_ok[:, None] & (cols[None, :] < HEAD_DIM))
        return
    # empty splits (incl. context_len 0) store m=-inf, l=0, acc=0; the merge ignores them
    row = ((seq * num_q_heads + heads) * num_splits + split).to(tl.int64)
    tl.store(partial_max_ptr + row, m_i, mask=g_ok)
    tl.store(partial_sum_ptr + row, l_i, mask=g_ok)
    tl.store(partial_out_ptr + row[:, None] * HEAD_DIM + cols[None, :], acc,
             mask=g_ok[:, None] & (cols[None, :] < HEAD_DIM))


def launch_split_kernel(q, k_cache, v_cache, k_scale, v_scale, block_tables, context_lens,
                         scale, out, scratch, num_splits, launch, quant, v_transposed,
                         stride_v_head, d_pad):
    """Kernel 1 as a program per (request, KV head, split): the split kernel, or with e4m3
    MMAs fp8_decode_mma's."""
    B, H_q, D = q.shape
    bs, H_kv = k_cache.shape[1], k_cache.shape[2]
    G = H_q // H_kv
    if launch.operand == FP8_DTYPE:
        kernel, d_pad = _split_e4m3_kernel, max(32, d_pad)
        constexprs = dict(GROUP_PAD=e4m3_group_pad(G))
    else:
        kernel = _split_kernel
        constexprs = dict(GROUP_PAD=max(16, next_pow2(G)), **dot_args(launch.operand),
                          QUANT=quant, V_IN_REGISTERS=launch.v_in_registers, V_T=v_transposed)
    partial_out, partial_max, partial_sum = scratch
    kernel[(B, H_kv, num_splits)](
        q, k_cache, v_cache, k_scale if quant else k_cache, v_scale if quant else v_cache,
        block_tables, context_lens, partial_out, partial_max,
        partial_sum, out, scale * LOG2E, q.stride(0), q.stride(1), k_cache.stride(0),
        k_cache.stride(1), k_cache.stride(2), stride_v_head, block_tables.stride(0),
        out.stride(0), out.stride(1), H_q, num_splits, DIRECT=num_splits == 1, GROUP=G,
        HEAD_DIM=D, BLOCK_SIZE=bs, TILE_N=launch.tile_n, HEAD_DIM_PAD=d_pad, **constexprs,
        num_warps=launch.num_warps, num_stages=launch.num_stages,
        **({} if launch.maxnreg is None else {"maxnreg": launch.maxnreg}))
