"""Tile-level building blocks shared by the kernels that read the paged KV cache.

    paged_offsets        token positions -> element offsets, through a block table
                         (paged_block_offsets: block offset and slot apart)
    kv_tile_offsets      a tile's K and V element offsets (V in rows or stored transposed)
    first_tile_block,    a tile loop's walk of the block table: one entry per tile, read a
    walk_tile            tile ahead, where a tile lies in one block; else one per key
    split_key_range      the keys of one split of a decode program (flash-decoding)
    load_kv_tile         a tile of cached K or V in the cache dtype
    dot_operand          a tile as a tl.dot operand (and the interpreter's half-precision fix)
    online_softmax_step  one flash-attention update of the running row max and sum
    attend_kv_tiles      the K/V tile loop of paged decode and paged prefill (a full-precision
                         cache; fp8_tiles.py has the FP8 loop and attend_tiles, which picks)

Conventions of every kernel in zipage/kernels:
  * Argument names: `<tensor>_ptr` for pointers (the wrapper's tensor name),
    `stride_<tensor>_<dim>` for strides, lower_snake for runtime scalars, UPPER_SNAKE for
    constexprs: BLOCK_SIZE is the KV-cache block size b, TILE_* are tile extents, *_PAD are
    power-of-two paddings, GROUP = H_q // H_kv, DOT_DTYPE and DOT_PREC come from dot_args.
  * Softmax in the log2 domain: logits times qk_scale = scale * LOG2E, then exp2.
  * Specialisation: Triton compiles a variant per class (== 1, % 16 == 0) of every integer
    argument. Integers that change from step to step (batch size, block-table width and
    hence its row stride, split counts) are listed in `do_not_specialize`, so one compiled
    variant serves every step: a new class mid-run cost a 1.7 s compile stall
    (docs/measurements.md). Model constants (head dim, group, block size) are constexprs.
"""
import torch

from zipage.kernels._dispatch import INTERPRET, tl, triton

LOG2E = 1.4426950408889634

# The Triton interpreter multiplies the raw 16-bit patterns of bf16 tl.dot operands and
# truncates fp32 -> bf16 casts. Under it, half-precision operands are fp32 tensors holding
# values rounded to the half type: products of half values are exact in fp32, so results
# match the compiled kernels.
INTERPRETER = tl.constexpr(INTERPRET)

_TL_DTYPES = {torch.float32: tl.float32, torch.float16: tl.float16,
              torch.bfloat16: tl.bfloat16}


def dot_args(dtype: torch.dtype) -> dict:
    """Constexpr kwargs of a kernel's tl.dot: DOT_DTYPE, the operand type (the cache dtype;
    for an FP8 cache the model dtype, fp8.dot_dtype), and DOT_PREC, "ieee" for fp32 operands
    (tf32 would lose ~1e-3; half types ignore it)."""
    exact = dtype == torch.float32 or INTERPRET
    return dict(DOT_DTYPE=_TL_DTYPES[dtype], DOT_PREC="ieee" if exact else "tf32")


@triton.jit
def dot_operand(x, DOT_DTYPE: tl.constexpr):
    """x rounded (to nearest even) to DOT_DTYPE for tl.dot; see INTERPRETER."""
    if INTERPRETER:
        if DOT_DTYPE == tl.bfloat16:
            if x.dtype == tl.bfloat16:
                return x.to(tl.float32)
            bits = x.to(tl.float32).to(tl.uint32, bitcast=True)
            bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
            return bits.to(tl.float32, bitcast=True)
        return x.to(DOT_DTYPE).to(tl.float32)
    return x.to(DOT_DTYPE)


@triton.jit
def paged_block_offsets(table_row_ptr, positions, mask, stride_block,
                        BLOCK_SIZE: tl.constexpr):
    """(int64 offset of each position's block, its slot in the block): block
    table_row[pos // BLOCK_SIZE], slot pos % BLOCK_SIZE. Masked positions read no table
    entry (their block is block 0), so -1 padding is never followed."""
    block = tl.load(table_row_ptr + positions // BLOCK_SIZE, mask=mask, other=0).to(tl.int64)
    return block * stride_block, positions % BLOCK_SIZE


@triton.jit
def paged_offsets(table_row_ptr, positions, mask, stride_block, stride_slot,
                  BLOCK_SIZE: tl.constexpr):
    """int64 offsets of one sequence's token positions in a paged cache
    (paged_block_offsets, the slot times stride_slot)."""
    block_offset, slot = paged_block_offsets(table_row_ptr, positions, mask, stride_block,
                                             BLOCK_SIZE)
    return block_offset + slot * stride_slot


@triton.jit
def kv_tile_offsets(block_offset, slots, head_offset, v_head_offset, stride_slot,
                    V_T: tl.constexpr):
    """(K offsets, V offsets) of keys at `slots` of the blocks at block_offset: V at K's
    offsets (a cache in rows) or, V_T, at v_head_offset + block_offset + slot
    (fp8.transposed_v_view: a V cache stored transposed per block, slot stride 1)."""
    offsets = head_offset + block_offset + slots * stride_slot
    v_offsets = offsets
    if V_T:
        v_offsets = v_head_offset + block_offset + slots
    return offsets, v_offsets


@triton.jit
def first_tile_block(table_row_ptr, key_start, key_end, BLOCK_SIZE: tl.constexpr,
                     TILE_N: tl.constexpr):
    """The block of the first tile at key_start, for walk_tile (0 where tiles span blocks)."""
    block = key_start * 0
    if BLOCK_SIZE % TILE_N == 0:
        block = tl.load(table_row_ptr + key_start // BLOCK_SIZE, mask=key_start < key_end,
                        other=0)
    return block


@triton.jit
def walk_tile(table_row_ptr, block, start, key_end, head_offset, v_head_offset, stride_block,
              stride_slot, BLOCK_SIZE: tl.constexpr, TILE_N: tl.constexpr, V_T: tl.constexpr):
    """(keys, K offsets, V offsets, next block) of the tile at `start`, a multiple of TILE_N;
    `block` is this tile's block (first_tile_block, then the last call's next block).

    Where a tile lies in one block, the table is read once per tile and a tile ahead, so the
    K/V loads depend on no load of their own iteration and num_stages sets how many tiles
    are in flight (a table read in the same iteration held the pipeline to one). Where tiles
    span blocks, each key reads its own table entry."""
    next_block = block
    if BLOCK_SIZE % TILE_N == 0:
        following = start + TILE_N
        next_block = tl.load(table_row_ptr + following // BLOCK_SIZE, mask=following < key_end,
                             other=0)
        keys = start + tl.arange(0, TILE_N)  # after the table read: the PTX of the former loops
        # the tile's first slot, a multiple of TILE_N: Triton 3.6 cannot see it, and without
        # the hint reads V_T's contiguous keys a byte at a time (docs/fp8.md)
        slots = tl.multiple_of(start % BLOCK_SIZE, TILE_N) + tl.arange(0, TILE_N)
        block_offset = block.to(tl.int64) * stride_block
    else:
        keys = start + tl.arange(0, TILE_N)
        block_offset, slots = paged_block_offsets(table_row_ptr, keys, keys < key_end,
                                                  stride_block, BLOCK_SIZE)
    offsets, v_offsets = kv_tile_offsets(block_offset, slots, head_offset, v_head_offset,
                                         stride_slot, V_T)
    return keys, offsets, v_offsets, next_block


@triton.jit
def split_key_range(ctx, split, num_splits, TILE_N: tl.constexpr):
    """(key_start, key_end, full_end) of split `split` of num_splits over ctx keys, in whole
    tiles: [key_start, full_end) holds tiles with no padding key, [full_end, key_end) the
    context's partial last tile if this split has it."""
    tiles_per_split = tl.cdiv(tl.cdiv(ctx, TILE_N), num_splits)
    key_start = split * tiles_per_split * TILE_N
    key_end = tl.minimum(key_start + tiles_per_split * TILE_N, ctx)
    return key_start, key_end, tl.minimum(key_end, ctx // TILE_N * TILE_N)


@triton.jit
def load_kv_tile(cache_ptr, row_offsets, row_mask, HEAD_DIM: tl.constexpr,
                 HEAD_DIM_PAD: tl.constexpr):
    """(rows, HEAD_DIM_PAD) tile of a K or V cache in the cache dtype, row r from element
    row_offsets[r]; 0 where row_mask is false and past HEAD_DIM."""
    cols = tl.arange(0, HEAD_DIM_PAD)
    mask = row_mask[:, None] & (cols[None, :] < HEAD_DIM)
    return tl.load(cache_ptr + row_offsets[:, None] + cols[None, :], mask=mask, other=0.0)


@triton.jit
def online_softmax_step(m_i, l_i, s):
    """Fold a (rows, keys) tile of log2-domain scores into the running row max m_i and sum
    l_i. Returns (max, sum, p = exp2(s - max), alpha): alpha rescales anything accumulated
    under the old max. The new max must be finite (every row sees a key by now)."""
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(s - m_new[:, None])
    return m_new, l_i * alpha + tl.sum(p, 1), p, alpha


@triton.jit
def attend_kv_tiles(q, m_i, l_i, acc, k_cache_ptr, v_cache_ptr, table_row_ptr, head_offset,
                    stride_block, stride_slot, key_start, key_end, last_key, qk_scale,
                    MASKED: tl.constexpr, BLOCK_SIZE: tl.constexpr, TILE_N: tl.constexpr,
                    HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr,
                    DOT_DTYPE: tl.constexpr, DOT_PREC: tl.constexpr):
    """Attend the query tile q (rows, HEAD_DIM_PAD), a dot operand, to keys
    [key_start, key_end) of one sequence, TILE_N keys at a time, updating the online
    softmax state: running max m_i, sum l_i (rows,), unnormalised output acc (rows,
    HEAD_DIM_PAD). MASKED: row r sees keys <= last_key[r]; unmasked (full tiles), every key
    of the range must be visible to every row. head_offset selects the KV head."""
    for start in range(key_start, key_end, TILE_N):
        keys = start + tl.arange(0, TILE_N)
        key_ok = keys < key_end
        offsets = head_offset + paged_offsets(table_row_ptr, keys, key_ok, stride_block,
                                              stride_slot, BLOCK_SIZE)
        k = dot_operand(load_kv_tile(k_cache_ptr, offsets, key_ok, HEAD_DIM, HEAD_DIM_PAD),
                        DOT_DTYPE)
        s = tl.dot(q, tl.trans(k), input_precision=DOT_PREC) * qk_scale
        if MASKED:
            s = tl.where(keys[None, :] <= last_key[:, None], s, float("-inf"))
        m_i, l_i, p, alpha = online_softmax_step(m_i, l_i, s)
        v = dot_operand(load_kv_tile(v_cache_ptr, offsets, key_ok, HEAD_DIM, HEAD_DIM_PAD),
                        DOT_DTYPE)
        acc = acc * alpha[:, None] + tl.dot(dot_operand(p, DOT_DTYPE), v,
                                            input_precision=DOT_PREC)
    return m_i, l_i, acc
