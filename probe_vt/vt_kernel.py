"""Prototype: FP8 decode with V stored transposed per block: (NB, H_kv, D, b)."""
import torch
import triton
import triton.language as tl
from zipage.kernels.paged_tiles import online_softmax_step


@triton.jit
def _vt_kernel(q_ptr, k_ptr, vt_ptr, ks_ptr, vs_ptr, table_ptr, lens_ptr, out_ptr, pout_ptr,
               pmax_ptr, psum_ptr, qk_scale, stride_table_row, num_splits,
               H_KV: tl.constexpr, GROUP: tl.constexpr, D: tl.constexpr, BS: tl.constexpr,
               TILE_N: tl.constexpr, GROUP_PAD: tl.constexpr, TRANS_FIRST: tl.constexpr,
               DIRECT: tl.constexpr):
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    ctx = tl.load(lens_ptr + seq)
    tiles_per_split = tl.cdiv(tl.cdiv(ctx, TILE_N), num_splits)
    key_start = split * tiles_per_split * TILE_N
    key_end = tl.minimum(key_start + tiles_per_split * TILE_N, ctx)
    g = tl.arange(0, GROUP_PAD)
    cols = tl.arange(0, D)
    heads = kv_head * GROUP + g
    g_ok = g < GROUP
    q = tl.load(q_ptr + seq.to(tl.int64) * (GROUP * H_KV * D) + heads[:, None] * D + cols[None, :],
                mask=g_ok[:, None], other=0.0).to(tl.float16)
    m_i = tl.full([GROUP_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([GROUP_PAD], tl.float32)
    acc = tl.zeros([GROUP_PAD, D], tl.float32)
    table_row = table_ptr + seq.to(tl.int64) * stride_table_row
    block = tl.load(table_row + key_start // BS, mask=key_start < key_end, other=0)
    j = tl.arange(0, TILE_N)
    for start in range(key_start, key_end, TILE_N):
        following = start + TILE_N
        next_block = tl.load(table_row + following // BS, mask=following < key_end, other=0)
        slot = start % BS + j
        blk = block.to(tl.int64) * (BS * H_KV * D)
        k_off = blk + slot * (H_KV * D) + kv_head * D
        k = tl.load(k_ptr + k_off[:, None] + cols[None, :])
        ks = tl.load(ks_ptr + block.to(tl.int64) * (BS * H_KV) + slot * H_KV + kv_head)
        s = tl.dot(q, tl.trans(k.to(tl.float16))) * (ks * qk_scale)[None, :]
        m_i, l_i, p, alpha = online_softmax_step(m_i, l_i, s)
        vt_off = blk + kv_head * (D * BS) + tl.multiple_of(start % BS, TILE_N)
        vt = tl.load(vt_ptr + vt_off + cols[:, None] * BS + j[None, :])  # (D, TILE_N)
        vs = tl.load(vs_ptr + block.to(tl.int64) * (BS * H_KV) + slot * H_KV + kv_head)
        vmax = tl.max(vs, 0)
        w = vs / tl.where(vmax > 0, vmax, 1.0)
        if TRANS_FIRST:
            v = tl.trans(vt).to(tl.float16)
        else:
            v = tl.trans(vt.to(tl.float16))
        pv = tl.dot((p * w[None, :]).to(tl.float16), v)
        acc = acc * alpha[:, None] + pv * vmax
        block = next_block
    if DIRECT:
        o = tl.where(l_i[:, None] > 0, acc / tl.where(l_i > 0, l_i, 1.0)[:, None], 0.0)
        tl.store(out_ptr + seq.to(tl.int64) * (GROUP * H_KV * D) + heads[:, None] * D + cols[None, :],
                 o.to(out_ptr.dtype.element_ty), mask=g_ok[:, None])
        return
    row = ((seq * GROUP * H_KV + heads) * num_splits + split).to(tl.int64)
    tl.store(pmax_ptr + row, m_i, mask=g_ok)
    tl.store(psum_ptr + row, l_i, mask=g_ok)
    tl.store(pout_ptr + row[:, None] * D + cols[None, :], acc, mask=g_ok[:, None])


def vt_decode(q, k_cache, vt_cache, k_scale, v_scale, table, lens, scale, num_splits, out,
              scratch, tile_n=128, num_warps=4, num_stages=3, trans_first=False):
    """q (B,H_q,D) bf16; k_cache (NB,b,H_kv,D) e4m3; vt_cache (NB,H_kv,D,b) e4m3; scales (NB,b,H_kv)."""
    from zipage.kernels.paged_decode import _merge_kernel
    B, H_q, D = q.shape
    NB, bs, H_kv, _ = k_cache.shape
    pout, pmax, psum = scratch
    _vt_kernel[(B, H_kv, num_splits)](
        q, k_cache, vt_cache, k_scale, v_scale, table, lens, out, pout, pmax, psum,
        scale * 1.4426950408889634, table.stride(0), num_splits, H_KV=H_kv, GROUP=H_q // H_kv,
        D=D, BS=bs, TILE_N=tile_n, GROUP_PAD=max(16, H_q // H_kv), TRANS_FIRST=trans_first,
        DIRECT=num_splits == 1, num_warps=num_warps, num_stages=num_stages)
    if num_splits > 1:
        _merge_kernel[(B, H_q)](pout, pmax, psum, out, out.stride(0), out.stride(1), H_q,
                                num_splits, HEAD_DIM=D, SPLITS_PAD=max(2, 1 << (num_splits - 1).bit_length()),
                                HEAD_DIM_PAD=D, num_warps=1)
    return out
