"""Paged decode on an FP8 cache with e4m3 tensor-core MMAs (the decode operand
torch.float8_e4m3fn; fp8_launch.py). Same arguments and partial results as
paged_decode._split_kernel, whose wrapper launches it; the merge kernel is shared.

Why: the default FP8 decode converts every e4m3 element of K and V to f16 in registers for
its tl.dot, 128 conversions per thread per 128-key tile, and with bf16 operands, whose
conversion takes more instructions, the same kernel reads at 61% of the byte roofline
against f16's 78% (docs/fp8.md): the conversions bound it. Hopper's e4m3 MMA (wgmma) takes
the cache bytes from shared memory as they are, but needs at least 64 rows, and a decode
tile has GROUP query rows (4 for Qwen3-8B). So the keys are the M dimension here:

    S^T (keys, heads) = K tile (keys, D) . Q^T (D, heads)
    O^T (D, heads)   += V^T tile (D, keys) . P^T (keys, heads)

Both A operands are cache tiles contiguous along the contraction (K in rows; V stored
transposed per block, the engine's FP8 layout), as e4m3 MMAs require. The B operands are
made in registers, q once and P every tile, each as two e4m3 terms x = hi + lo (hi = e4m3(x),
lo = e4m3(x - hi): 8 significant bits), so a bf16 q scaled by a power of two is exact and P
keeps bf16's precision (2^-8 relative, plus 2^-18 absolute below e4m3's normal range). The
two terms go to two MMAs of GROUP_PAD >= 16 columns (wgmma; 8 columns would compile to an
f16 mma.sync with conversions) accumulating into one result. Packing them side by side as one
operand [hi | lo] (join + reshape) halves the MMAs but gave wrong outputs on the GPU in 29 of
30 cases at head dim >= 64 (Triton 3.6, H100; docs/fp8.md, "Decode with e4m3 MMAs").

The scales act as in fp8_tiles.py: K's on the score rows, V's folded into P with the tile's
largest V scale v_max factored out (P * v_scale / v_max * 256 <= 256 < 448). v_max rides in
the spare column AUX of the per-tile max over keys (GROUP_PAD > GROUP), so a tile has one
cross-warp reduction; the softmax sum is kept per element (l_acc) and reduced once at the
end. Compiled for sm_90 with Triton 3.6 at Qwen3-8B's shape (128 keys, 4 warps, 2 stages)
the K/V loop is 685 instructions per tile, 157 registers, against the f16 path's 788 and 168
(python -m zipage.sim.decode_occupancy).
"""
from zipage.kernels._dispatch import next_pow2, tl, triton
from zipage.kernels.paged_tiles import (INTERPRETER, first_tile_block, split_key_range,
                                        walk_tile)
from zipage.kernels.store_kv import round_to_e4m3


@triton.jit
def e4m3_terms(x):
    """(hi, lo), two e4m3 tl.dot operands with hi + lo = x to 8 significant bits: hi = e4m3(x),
    lo = e4m3(x - hi), for fp32 |x| <= 448; beyond, hi saturates at +-448 as the hardware
    cast does (fp32 holding them under the interpreter)."""
    if INTERPRETER:
        hi = round_to_e4m3(tl.clamp(x, -448.0, 448.0))
        return hi, round_to_e4m3(tl.clamp(x - hi, -448.0, 448.0))
    hi = x.to(tl.float8e4nv)
    return hi, (x - hi.to(tl.float32)).to(tl.float8e4nv)


@triton.jit
def terms_dot(a, hi, lo):
    """a (M, K) e4m3 times the sum of a B operand's two e4m3 terms hi, lo (K, N): two MMAs
    into one accumulator (M, N) float32."""
    return tl.dot(a, lo, tl.dot(a, hi, input_precision="ieee"), input_precision="ieee")


@triton.jit
def e4m3_tile(x):
    """A cache tile as an e4m3 tl.dot operand (fp32 holding the same values under the
    interpreter, whose dot would multiply raw bytes)."""
    if INTERPRETER:
        return x.to(tl.float32)
    return x


@triton.jit
def _tile_step(q_hi_t, q_lo_t, col_scale, aux, m_i, l_acc, acc, k_cache_ptr, v_cache_ptr,
               k_scale_ptr, v_scale_ptr, offsets, v_offsets, keys, key_end,
               MASKED: tl.constexpr, BLOCK_SIZE: tl.constexpr, HEAD_DIM: tl.constexpr,
               HEAD_DIM_PAD: tl.constexpr):
    """One tile of TILE_N keys (K rows at element `offsets`, V columns at `v_offsets`) folded
    into the running max m_i (GROUP_PAD,), sums l_acc (TILE_N, GROUP_PAD) and acc
    (HEAD_DIM_PAD, GROUP_PAD), all in the transposed (keys or dims, heads) orientation; q_hi_t,
    q_lo_t (HEAD_DIM_PAD, GROUP_PAD): q's two e4m3 terms, transposed."""
    dims = tl.arange(0, HEAD_DIM_PAD)
    key_ok = keys < key_end
    k_ptrs = k_cache_ptr + offsets[:, None] + dims[None, :]
    v_ptrs = v_cache_ptr + v_offsets[None, :] + dims[:, None] * BLOCK_SIZE
    if HEAD_DIM == HEAD_DIM_PAD:
        k = tl.load(k_ptrs)
        v = tl.load(v_ptrs)  # a MASKED tile's columns past key_end are finite, weighted 0
    else:
        k = tl.load(k_ptrs, mask=dims[None, :] < HEAD_DIM, other=0.0)
        v = tl.load(v_ptrs, mask=dims[:, None] < HEAD_DIM, other=0.0)
    if MASKED:
        k_scale = tl.load(k_scale_ptr + offsets // HEAD_DIM, mask=key_ok, other=0.0)
        v_scale = tl.load(v_scale_ptr + offsets // HEAD_DIM, mask=key_ok, other=0.0)
    else:
        k_scale = tl.load(k_scale_ptr + offsets // HEAD_DIM)
        v_scale = tl.load(v_scale_ptr + offsets // HEAD_DIM)
    s = terms_dot(e4m3_tile(k), q_hi_t, q_lo_t)  # (TILE_N, GROUP_PAD)
    t = s * k_scale[:, None]  # logits / col_scale
    if MASKED:
        t = tl.where(key_ok[:, None], t, float("-inf"))
    tile_max = tl.max(tl.where(aux[None, :], v_scale[:, None], t), 0)
    v_max = tl.sum(tl.where(aux, tile_max, 0.0), 0)
    m_new = tl.maximum(m_i, tile_max * col_scale)
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(tl.fma(t, col_scale[None, :], -m_new[None, :]))
    l_acc = l_acc * alpha[None, :] + p
    weight = v_scale * (256.0 / tl.where(v_max > 0, v_max, 1.0))  # in [0, 256]
    p_hi, p_lo = e4m3_terms(p * weight[:, None])
    pv = terms_dot(e4m3_tile(v), p_hi, p_lo)
    acc = acc * alpha[None, :] + pv * (v_max * (1.0 / 256.0))
    return m_new, l_acc, acc


@triton.jit
def _attend(q_hi_t, q_lo_t, col_scale, aux, m_i, l_acc, acc, k_cache_ptr, v_cache_ptr,
            k_scale_ptr, v_scale_ptr, table_row_ptr, head_offset, v_head_offset,
            stride_block, stride_slot, key_start, key_end, MASKED: tl.constexpr,
            BLOCK_SIZE: tl.constexpr, TILE_N: tl.constexpr, HEAD_DIM: tl.constexpr,
            HEAD_DIM_PAD: tl.constexpr):
    """The tiles of keys [key_start, key_end), key_start a multiple of TILE_N, the block
    table walked by paged_tiles.walk_tile."""
    block = first_tile_block(table_row_ptr, key_start, key_end, BLOCK_SIZE, TILE_N)
    for start in range(key_start, key_end, TILE_N):
        keys, offsets, v_offsets, block = walk_tile(
            table_row_ptr, block, start, key_end, head_offset, v_head_offset, stride_block,
            stride_slot, BLOCK_SIZE, TILE_N, True)
        m_i, l_acc, acc = _tile_step(q_hi_t, q_lo_t, col_scale, aux, m_i, l_acc, acc,
                                     k_cache_ptr, v_cache_ptr, k_scale_ptr, v_scale_ptr,
                                     offsets, v_offsets, keys, key_end, MASKED,
                                     BLOCK_SIZE, HEAD_DIM, HEAD_DIM_PAD)
    return m_i, l_acc, acc


@triton.jit(do_not_specialize=["stride_table_row", "num_splits"])
def _split_e4m3_kernel(q_ptr, k_cache_ptr, v_cache_ptr, k_scale_ptr, v_scale_ptr,
                       block_tables_ptr, context_lens_ptr,
                       partial_out_ptr, partial_max_ptr, partial_sum_ptr, out_ptr, qk_scale,
                       stride_q_seq, stride_q_head, stride_k_block, stride_k_slot,
                       stride_k_head, stride_v_head, stride_table_row, stride_out_seq,
                       stride_out_head, num_q_heads, num_splits,
                       DIRECT: tl.constexpr, GROUP: tl.constexpr, HEAD_DIM: tl.constexpr,
                       BLOCK_SIZE: tl.constexpr, TILE_N: tl.constexpr,
                       GROUP_PAD: tl.constexpr, HEAD_DIM_PAD: tl.constexpr):
    """paged_decode._split_kernel's grid, splits and outputs; GROUP_PAD > GROUP (the spare
    column carries v_max) and >= 16, HEAD_DIM_PAD >= 32, the V cache transposed per block."""
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    ctx = tl.load(context_lens_ptr + seq)
    key_start, key_end, full_end = split_key_range(ctx, split, num_splits, TILE_N)

    g = tl.arange(0, GROUP_PAD)
    dims = tl.arange(0, HEAD_DIM_PAD)
    heads = kv_head * GROUP + g
    g_ok = g < GROUP
    q = tl.load(q_ptr + seq.to(tl.int64) * stride_q_seq + heads[:, None] * stride_q_head
                + dims[None, :], mask=g_ok[:, None] & (dims[None, :] < HEAD_DIM),
                other=0.0).to(tl.float32)
    # a power-of-two scale per head puts q's largest element at (224, 448]: dividing is exact
    amax = tl.max(tl.abs(q), 1)
    q_scale = tl.exp2(tl.ceil(tl.log2(tl.where(amax > 0, amax, 448.0) * (1.0 / 448.0))))
    q_hi, q_lo = e4m3_terms(q / q_scale[:, None])
    aux = g == GROUP_PAD - 1
    col_scale = tl.where(aux, 1.0, q_scale * qk_scale)

    m_i = tl.full([GROUP_PAD], float("-inf"), tl.float32)
    l_acc = tl.zeros([TILE_N, GROUP_PAD], tl.float32)
    acc = tl.zeros([HEAD_DIM_PAD, GROUP_PAD], tl.float32)
    table_row = block_tables_ptr + seq.to(tl.int64) * stride_table_row
    head_offset = kv_head * stride_k_head
    v_head_offset = kv_head * stride_v_head
    q_hi_t, q_lo_t = tl.trans(q_hi), tl.trans(q_lo)  # (HEAD_DIM_PAD, GROUP_PAD) each
    m_i, l_acc, acc = _attend(q_hi_t, q_lo_t, col_scale, aux, m_i, l_acc, acc, k_cache_ptr,
                              v_cache_ptr, k_scale_ptr, v_scale_ptr, table_row, head_offset,
                              v_head_offset, stride_k_block, stride_k_slot, key_start,
                              full_end, False, BLOCK_SIZE, TILE_N, HEAD_DIM, HEAD_DIM_PAD)
    m_i, l_acc, acc = _attend(q_hi_t, q_lo_t, col_scale, aux, m_i, l_acc, acc, k_cache_ptr,
                              v_cache_ptr, k_scale_ptr, v_scale_ptr, table_row, head_offset,
                              v_head_offset, stride_k_block, stride_k_slot,
                              tl.maximum(key_start, full_end), key_end, True, BLOCK_SIZE,
                              TILE_N, HEAD_DIM, HEAD_DIM_PAD)
    l_i = tl.sum(l_acc, 0)

    out_mask = g_ok[None, :] & (dims[:, None] < HEAD_DIM)
    if DIRECT:  # the only split: normalise here (context_len 0 -> zeros, as the merge does)
        o = tl.where(l_i[None, :] > 0, acc / tl.where(l_i > 0, l_i, 1.0)[None, :], 0.0)
        tl.store(out_ptr + seq.to(tl.int64) * stride_out_seq + heads[None, :] * stride_out_head
                 + dims[:, None], o.to(out_ptr.dtype.element_ty), mask=out_mask)
        return
    row = ((seq * num_q_heads + heads) * num_splits + split).to(tl.int64)
    tl.store(partial_max_ptr + row, m_i, mask=g_ok)
    tl.store(partial_sum_ptr + row, l_i, mask=g_ok)
    tl.store(partial_out_ptr + row[None, :] * HEAD_DIM + dims[:, None], acc, mask=out_mask)


def e4m3_group_pad(group: int) -> int:
    """GROUP_PAD for `group` query heads per KV head: one spare column (v_max), and at least
    16, since e4m3 MMAs of 16 columns or more compile to wgmma (fewer: an f16 mma.sync with
    conversions, the cost this kernel avoids)."""
    return max(16, next_pow2(group + 1))


def check_e4m3_launch(v_transposed: bool, tile_n: int) -> None:
    """What this kernel needs of its caller: V stored transposed, tiles of >= 32 keys."""
    if not v_transposed:
        raise ValueError("fp8_operand float8_e4m3fn needs the V cache stored transposed "
                         "(fp8.transposed_v_view, the engine's FP8 layout)")
    if tile_n < 32:
        raise ValueError(f"fp8_operand float8_e4m3fn: tile_n >= 32 (e4m3 MMAs contract over "
                         f"at least 32 keys), got {tile_n}")
