"""Tile steps of the attention kernels on an FP8 (e4m3) cache, and attend_tiles, the K/V loop
of paged decode and prefill for either cache.

The e4m3 tiles go to tl.dot as they are (converted in registers, exact) and the per-(token,
KV head) scales (fp8.py) act on the small matrices instead of on every element:

    K: s[r, j] = (q_r . kq_j) * k_scale_j * qk_scale     a scale per column of the scores
    V: acc[r] += vmax * sum_j (p[r, j] * w_j) * vq_j      w_j = v_scale_j / vmax in [0, 1]

where vmax is the tile's largest V scale: p * w stays in [0, 1], so P rounded to an f16 dot
operand cannot underflow the way p * v_scale (as small as 1e-9) would. The weights w go on P
(decode's default) or on V's tile (V_IN_REGISTERS, prefill's default: weighted_v_operand);
fp8_launch.py says which is faster where; for a V cache stored transposed per block
(fp8.transposed_v_view, the engine's: V_T) V's tile is read (D, keys), keys contiguous, and
the weights go on P. Per key and KV head
that is D bytes + one float32 per K and per V, two scalar multiplies per score and one per
probability; the cost per element is one conversion (e4m3x2 -> f16x2 is one instruction on
sm_89+), against the former load-time dequantize q * s (convert, fp32 multiply, round).
Bytes and FLOPs per step: docs/fp8.md.
"""
from zipage.kernels._dispatch import tl, triton
from zipage.kernels.paged_tiles import (INTERPRETER, attend_kv_tiles, dot_operand,
                                        first_tile_block, online_softmax_step, walk_tile)


@triton.jit
def fp8_operand(x, DOT_DTYPE: tl.constexpr):
    """An e4m3 tile as a tl.dot operand. Exact: every e4m3 value is an f16, bf16 and f32
    value. Compiled, one conversion in registers, no fp32 round trip; under the
    interpreter fp32 holding the same values (see paged_tiles.INTERPRETER)."""
    if INTERPRETER:
        return x.to(tl.float32)
    return x.to(DOT_DTYPE)


@triton.jit
def load_fp8_tile(cache_ptr, scale_ptr, offsets, key_ok, MASKED: tl.constexpr,
                  HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr):
    """(e4m3 tile (rows, HEAD_DIM_PAD), float32 scales (rows,)) of the cache rows at element
    `offsets`, a row's scale at offset // HEAD_DIM (fp8.py). Only a MASKED tile masks rows
    (to 0, scale 0) and only a padded head dim masks columns: full tiles load unpredicated."""
    cols = tl.arange(0, HEAD_DIM_PAD)
    ptrs = cache_ptr + offsets[:, None] + cols[None, :]
    scale_ptrs = scale_ptr + offsets // HEAD_DIM
    if MASKED:
        x = tl.load(ptrs, mask=key_ok[:, None] & (cols[None, :] < HEAD_DIM), other=0.0)
        scale = tl.load(scale_ptrs, mask=key_ok, other=0.0)
    else:
        if HEAD_DIM == HEAD_DIM_PAD:
            x = tl.load(ptrs)
        else:
            x = tl.load(ptrs, mask=cols[None, :] < HEAD_DIM, other=0.0)
        scale = tl.load(scale_ptrs)
    return x, scale


@triton.jit
def load_fp8_vt_tile(cache_ptr, scale_ptr, v_offsets, k_offsets, key_ok, MASKED: tl.constexpr,
                     BLOCK_SIZE: tl.constexpr, HEAD_DIM: tl.constexpr,
                     HEAD_DIM_PAD: tl.constexpr):
    """(e4m3 tile (HEAD_DIM_PAD, keys), float32 scales (keys,)) of a V cache stored transposed
    per block: key j's column starts at element v_offsets[j], its D elements BLOCK_SIZE apart
    (fp8.transposed_v_view); its scale sits at the K row's offset // HEAD_DIM.

    A MASKED tile's scales are 0 past key_ok, but its columns are read whole: a mask along the
    contiguous keys turns the load into one byte per element, and zeroing them afterwards
    costs shared memory and registers (3 -> 2 programs per SM; docs/fp8.md). Those columns
    are in bounds (slots of a real block, or block 0 where the table is padding) and finite:
    the FP8 write never stores a NaN byte (store_kv), so their weight 0 makes them count 0."""
    cols = tl.arange(0, HEAD_DIM_PAD)
    ptrs = cache_ptr + v_offsets[None, :] + cols[:, None] * BLOCK_SIZE
    scale_ptrs = scale_ptr + k_offsets // HEAD_DIM
    if HEAD_DIM == HEAD_DIM_PAD:
        x = tl.load(ptrs)
    else:
        x = tl.load(ptrs, mask=cols[:, None] < HEAD_DIM, other=0.0)
    if MASKED:
        scale = tl.load(scale_ptrs, mask=key_ok, other=0.0)
    else:
        scale = tl.load(scale_ptrs)
    return x, scale


@triton.jit
def fp8_scores(q, k, k_scale, qk_scale, DOT_DTYPE: tl.constexpr, DOT_PREC: tl.constexpr):
    """Scores (rows, keys) of the dot operand q against an e4m3 key tile k with row scales
    k_scale: (q . k^T) * k_scale * qk_scale, the scale on the columns."""
    s = tl.dot(q, tl.trans(fp8_operand(k, DOT_DTYPE)), input_precision=DOT_PREC)
    return s * (k_scale * qk_scale)[None, :]


@triton.jit
def weighted_v_operand(v, weight, DOT_DTYPE: tl.constexpr):
    """The e4m3 V tile (keys, HEAD_DIM_PAD) times its per-key weights, as a dot operand made
    in registers. The split into column pairs and the join keep the conversion ahead of
    shared memory: without them Triton moves the layout change above the conversion, and an
    8-bit operand contracted over keys (not contiguous in the cache) is then read from shared
    memory one byte per element (docs/fp8.md counts the instructions)."""
    w = dot_operand(weight, DOT_DTYPE)[:, None]
    pairs = tl.reshape(fp8_operand(v, DOT_DTYPE), (v.shape[0], v.shape[1] // 2, 2))
    even, odd = tl.split(pairs)
    joined = tl.join(dot_operand(even * w, DOT_DTYPE), dot_operand(odd * w, DOT_DTYPE))
    return tl.reshape(joined, (v.shape[0], v.shape[1]))


@triton.jit
def fp8_tile_step(q, m_i, l_i, acc, k_cache_ptr, v_cache_ptr, k_scale_ptr, v_scale_ptr,
                  offsets, v_offsets, keys, key_end, last_key, qk_scale, MASKED: tl.constexpr,
                  BLOCK_SIZE: tl.constexpr, HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr,
                  DOT_DTYPE: tl.constexpr, DOT_PREC: tl.constexpr, V_IN_REGISTERS: tl.constexpr,
                  V_T: tl.constexpr):
    """One K/V tile (K rows at element `offsets`, V at `v_offsets`: the same for a V cache in
    rows, the start of each key's column for V_T) folded into the online softmax state; the
    scales as in the module docstring."""
    key_ok = keys < key_end
    k, k_scale = load_fp8_tile(k_cache_ptr, k_scale_ptr, offsets, key_ok, MASKED, HEAD_DIM,
                               HEAD_DIM_PAD)
    s = fp8_scores(q, k, k_scale, qk_scale, DOT_DTYPE, DOT_PREC)
    if MASKED:
        s = tl.where(keys[None, :] <= last_key[:, None], s, float("-inf"))
    m_i, l_i, p, alpha = online_softmax_step(m_i, l_i, s)
    if V_T:
        v, v_scale = load_fp8_vt_tile(v_cache_ptr, v_scale_ptr, v_offsets, offsets, key_ok,
                                      MASKED, BLOCK_SIZE, HEAD_DIM, HEAD_DIM_PAD)
    else:
        v, v_scale = load_fp8_tile(v_cache_ptr, v_scale_ptr, offsets, key_ok, MASKED,
                                   HEAD_DIM, HEAD_DIM_PAD)
    v_max = tl.max(v_scale, 0)
    weight = v_scale / tl.where(v_max > 0, v_max, 1.0)
    if V_T:  # keys contiguous: the e4m3 tile is read like K's, the weights go on P
        v_operand = fp8_operand(v, DOT_DTYPE)
        pv = tl.dot(dot_operand(p * weight[None, :], DOT_DTYPE), tl.trans(v_operand),
                    input_precision=DOT_PREC)
    elif V_IN_REGISTERS:
        pv = tl.dot(dot_operand(p, DOT_DTYPE), weighted_v_operand(v, weight, DOT_DTYPE),
                    input_precision=DOT_PREC)
    else:  # the former path: the weights on P, V converted from bytes read one at a time
        pv = tl.dot(dot_operand(p * weight[None, :], DOT_DTYPE), fp8_operand(v, DOT_DTYPE),
                    input_precision=DOT_PREC)
    return m_i, l_i, acc * alpha[:, None] + pv * v_max


@triton.jit
def attend_fp8_tiles(q, m_i, l_i, acc, k_cache_ptr, v_cache_ptr, k_scale_ptr, v_scale_ptr,
                     table_row_ptr, head_offset, v_head_offset, stride_block, stride_slot,
                     key_start, key_end, last_key, qk_scale, MASKED: tl.constexpr,
                     BLOCK_SIZE: tl.constexpr, TILE_N: tl.constexpr, HEAD_DIM: tl.constexpr,
                     HEAD_DIM_PAD: tl.constexpr, DOT_DTYPE: tl.constexpr,
                     DOT_PREC: tl.constexpr, V_IN_REGISTERS: tl.constexpr, V_T: tl.constexpr):
    """paged_tiles.attend_kv_tiles for an FP8 cache with its scales; key_start must be a
    multiple of TILE_N (every caller's is). K and a V cache in rows share stride_block,
    stride_slot and head_offset; a V_T cache (block stride stride_block, slot stride 1) has
    its own v_head_offset."""
    block = first_tile_block(table_row_ptr, key_start, key_end, BLOCK_SIZE, TILE_N)
    for start in range(key_start, key_end, TILE_N):
        keys, offsets, v_offsets, block = walk_tile(
            table_row_ptr, block, start, key_end, head_offset, v_head_offset, stride_block,
            stride_slot, BLOCK_SIZE, TILE_N, V_T)
        m_i, l_i, acc = fp8_tile_step(q, m_i, l_i, acc, k_cache_ptr, v_cache_ptr, k_scale_ptr,
                                      v_scale_ptr, offsets, v_offsets, keys, key_end, last_key,
                                      qk_scale, MASKED, BLOCK_SIZE, HEAD_DIM, HEAD_DIM_PAD,
                                      DOT_DTYPE, DOT_PREC, V_IN_REGISTERS, V_T)
    return m_i, l_i, acc


@triton.jit
def attend_tiles(q, m_i, l_i, acc, k_cache_ptr, v_cache_ptr, k_scale_ptr, v_scale_ptr,
                 table_row_ptr, head_offset, v_head_offset, stride_block, stride_slot,
                 key_start, key_end, last_key, qk_scale, MASKED: tl.constexpr,
                 BLOCK_SIZE: tl.constexpr, TILE_N: tl.constexpr, HEAD_DIM: tl.constexpr,
                 HEAD_DIM_PAD: tl.constexpr, DOT_DTYPE: tl.constexpr, DOT_PREC: tl.constexpr,
                 QUANT: tl.constexpr, V_IN_REGISTERS: tl.constexpr, V_T: tl.constexpr):
    """The K/V loop of paged decode and prefill: attend_fp8_tiles for an FP8 cache (QUANT),
    else paged_tiles.attend_kv_tiles (the scale pointers and v_head_offset unused)."""
    if QUANT:
        m_i, l_i, acc = attend_fp8_tiles(
            q, m_i, l_i, acc, k_cache_ptr, v_cache_ptr, k_scale_ptr, v_scale_ptr,
            table_row_ptr, head_offset, v_head_offset, stride_block, stride_slot, key_start,
            key_end, last_key, qk_scale, MASKED, BLOCK_SIZE, TILE_N, HEAD_DIM, HEAD_DIM_PAD,
            DOT_DTYPE, DOT_PREC, V_IN_REGISTERS, V_T)
    else:
        m_i, l_i, acc = attend_kv_tiles(
            q, m_i, l_i, acc, k_cache_ptr, v_cache_ptr, table_row_ptr, head_offset,
            stride_block, stride_slot, key_start, key_end, last_key, qk_scale, MASKED,
            BLOCK_SIZE, TILE_N, HEAD_DIM, HEAD_DIM_PAD, DOT_DTYPE, DOT_PREC)
    return m_i, l_i, acc
