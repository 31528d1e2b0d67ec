"""Paged decode on an FP8 cache as one flat loop per program (persistent, flash-decoding).

paged_decode's split kernel runs one program per (request, KV head, split): each program
fills its own load pipeline, then drains it, and a program's first tiles wait on a chain of
loads (context length, block table, tile). With FP8 tiles half the bytes of bf16's, a
program of 2,048 keys is 16 tiles of 128 and that fixed cost is about one tile's time
(docs/fp8.md). Here a grid of `programs` (a few per SM) walks the work items w = pid,
pid + programs, ... — item w is (request, KV head, split) = divmod chain of w — through one
loop over all their tiles, so the pipeline runs on across items and fills once per program.

Per tile: the scores of keys past the item's end are -inf and their V weights 0 (the loads
are not masked: they stay inside allocated blocks or block 0, and the FP8 write never stores
a NaN byte, as fp8_tiles.load_fp8_vt_tile relies on). An item's first tile restarts the
online softmax (its running max set to -inf, so alpha = 0 clears the sum and accumulator);
its last tile writes the output (one split: normalised; else the partials that
paged_decode's merge kernel combines). An item with no keys takes one tile, all masked, and
writes zeros (partials m = -inf, l = 0). V must be stored transposed (fp8.transposed_v_view).
The reference is paged_decode.paged_decode_attention_reference.
"""
import torch

from zipage.kernels._dispatch import cdiv, next_pow2, tl, triton
from zipage.kernels.fp8_tiles import fp8_operand, fp8_scores
from zipage.kernels.paged_tiles import LOG2E, dot_args, dot_operand

ITEMS_PAD = 64  # items per program counted at once; the wrapper keeps items <= 64 * programs


@triton.jit
def item_range(ctx, split, num_splits, TILE_N: tl.constexpr):
    """(first key, end key, tiles to run >= 1) of one split of a context."""
    tiles_per_split = tl.cdiv(tl.cdiv(ctx, TILE_N), num_splits)
    start = split * tiles_per_split * TILE_N
    end = tl.minimum(start + tiles_per_split * TILE_N, ctx)
    return start, end, tl.maximum(tl.cdiv(end - start, TILE_N), 1)


@triton.jit(do_not_specialize=["stride_table_row", "num_splits", "num_items", "num_programs"])
def _flat_kernel(q_ptr, k_cache_ptr, v_cache_ptr, k_scale_ptr, v_scale_ptr,
                 block_tables_ptr, context_lens_ptr,
                 partial_out_ptr, partial_max_ptr, partial_sum_ptr, out_ptr, qk_scale,
                 stride_q_seq, stride_q_head, stride_k_block, stride_k_slot, stride_k_head,
                 stride_v_head, stride_table_row, stride_out_seq, stride_out_head,
                 num_q_heads, num_kv_heads, num_splits, num_items, num_programs,
                 DIRECT: tl.constexpr, GROUP: tl.constexpr, HEAD_DIM: tl.constexpr,
                 BLOCK_SIZE: tl.constexpr, TILE_N: tl.constexpr, GROUP_PAD: tl.constexpr,
                 DOT_DTYPE: tl.constexpr, DOT_PREC: tl.constexpr, ITEMS: tl.constexpr):
    pid = tl.program_id(0)
    per_seq = num_kv_heads * num_splits
    # this program's tiles in all: its items' tile counts, one vector load of their contexts
    mine = pid + tl.arange(0, ITEMS) * num_programs
    mine_ok = mine < num_items
    ctx_all = tl.load(context_lens_ptr + mine // per_seq, mask=mine_ok, other=0)
    _, _, tiles_all = item_range(ctx_all, mine % num_splits, num_splits, TILE_N)
    total = tl.sum(tl.where(mine_ok, tiles_all, 0), 0)

    g = tl.arange(0, GROUP_PAD)  # padded to >= 16 rows for tl.dot; extra rows are masked
    cols = tl.arange(0, HEAD_DIM)
    g_ok = g < GROUP
    lane = tl.arange(0, TILE_N)
    m_i = tl.full([GROUP_PAD], float("-inf"), tl.float32)
    l_i = tl.zeros([GROUP_PAD], tl.float32)
    acc = tl.zeros([GROUP_PAD, HEAD_DIM], tl.float32)

    # the current tile's item (w, seq, kv_head, split, key range) and its block, and the
    # next item's context, read an item ahead so that an item change waits on no load
    w = pid
    seq = w // per_seq
    kv_head = (w // num_splits) % num_kv_heads
    split = w % num_splits
    ctx = tl.load(context_lens_ptr + seq, mask=w < num_items, other=0)
    start, end, tiles = item_range(ctx, split, num_splits, TILE_N)
    next_ctx = tl.load(context_lens_ptr + (w + num_programs) // per_seq,
                       mask=w + num_programs < num_items, other=0)
    j = pid * 0  # tile of the item
    key = start
    block = tl.load(block_tables_ptr + seq.to(tl.int64) * stride_table_row + key // BLOCK_SIZE,
                    mask=key < end, other=0)
    # q stays in registers for the item (re-read at an item change); the mask compares a
    # vector, since the interpreter rejects a scalar i1 mask broadcast against one
    q = dot_operand(tl.load(q_ptr + seq.to(tl.int64) * stride_q_seq
                            + (kv_head * GROUP + g)[:, None] * stride_q_head + cols[None, :],
                            mask=(g_ok & (g * 0 + w < num_items))[:, None], other=0.0), DOT_DTYPE)
    for _ in range(0, total):
        keys = key + lane
        key_ok = keys < end
        slots = tl.multiple_of(key % BLOCK_SIZE, TILE_N) + lane
        block_offset = block.to(tl.int64) * stride_k_block
        k_offsets = kv_head * stride_k_head + block_offset + slots * stride_k_slot
        k = tl.load(k_cache_ptr + k_offsets[:, None] + cols[None, :])
        k_scale = tl.load(k_scale_ptr + k_offsets // HEAD_DIM)
        s = fp8_scores(q, k, k_scale, qk_scale, DOT_DTYPE, DOT_PREC)
        s = tl.where(key_ok[None, :], s, float("-inf"))
        m_i = tl.where(j == 0, float("-inf"), m_i)  # a new item: alpha 0 clears l and acc
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # an item with no keys
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        m_i = m_new
        v = tl.load(v_cache_ptr + kv_head * stride_v_head + block_offset + slots[None, :]
                    + cols[:, None] * BLOCK_SIZE)
        v_scale = tl.where(key_ok, tl.load(v_scale_ptr + k_offsets // HEAD_DIM), 0.0)
        v_max = tl.max(v_scale, 0)
        weight = v_scale / tl.where(v_max > 0, v_max, 1.0)
        pv = tl.dot(dot_operand(p * weight[None, :], DOT_DTYPE),
                    tl.trans(fp8_operand(v, DOT_DTYPE)), input_precision=DOT_PREC)
        acc = acc * alpha[:, None] + pv * v_max

        # Two branches on one test, kept apart so that the item change, which feeds the next
        # tiles' loads (the pipeline's first stage), does not wait on this tile's acc (its last)
        if j + 1 == tiles:  # the item's last tile: its output
            heads = kv_head * GROUP + g
            if DIRECT:
                o = acc * (1.0 / tl.where(l_i > 0, l_i, 1.0))[:, None]
                tl.store(out_ptr + seq.to(tl.int64) * stride_out_seq
                         + heads[:, None] * stride_out_head + cols[None, :],
                         o.to(out_ptr.dtype.element_ty), mask=g_ok[:, None])
            else:
                row = ((seq * num_q_heads + heads) * num_splits + split).to(tl.int64)
                tl.store(partial_max_ptr + row, m_i, mask=g_ok)
                tl.store(partial_sum_ptr + row, l_i, mask=g_ok)
                tl.store(partial_out_ptr + row[:, None] * HEAD_DIM + cols[None, :], acc,
                         mask=g_ok[:, None])
        if j + 1 == tiles:  # the next tile is the first of the program's next item
            w += num_programs
            ctx = next_ctx
            seq = w // per_seq
            kv_head = (w // num_splits) % num_kv_heads
            split = w % num_splits
            key, end, tiles = item_range(ctx, split, num_splits, TILE_N)
            following = w + num_programs
            next_ctx = tl.load(context_lens_ptr + following // per_seq,
                               mask=following < num_items, other=0)
            q = dot_operand(tl.load(q_ptr + seq.to(tl.int64) * stride_q_seq
                                    + (kv_head * GROUP + g)[:, None] * stride_q_head
                                    + cols[None, :],
                                    mask=(g_ok & (g * 0 + w < num_items))[:, None],
                                    other=0.0), DOT_DTYPE)
            j = j * 0
        else:
            key += TILE_N
            j += 1
        block = tl.load(block_tables_ptr + seq.to(tl.int64) * stride_table_row
                        + key // BLOCK_SIZE, mask=(key < end) & (w < num_items), other=0)


def flat_programs(num_items: int, num_sms: int, programs_per_sm: int) -> int:
    """Programs of the flat kernel: a few per SM, never more than the items, and enough
    that no program has more than ITEMS_PAD items."""
    return max(min(num_items, num_sms * programs_per_sm), cdiv(num_items, ITEMS_PAD), 1)


def flat_programs_per_sm(launch, head_dim: int, shared_per_sm: int) -> int:
    """launch.programs_per_sm, or fewer where the SM's shared memory cannot hold that many
    (sm_89's 100 KiB): programs beyond those resident would run as a second round. The
    estimate, (stages - 1) K/V tiles and scales, P and partials staging, is what the sm_90
    compile allocates at 128 keys x 128 (37,888 to 75,776 B; zipage/sim/flat_occupancy.py);
    registers fit by flat_maxnreg's cap."""
    tile = launch.tile_n
    shared = (launch.num_stages - 1) * (2 * tile * head_dim + 8 * tile) + 2 * 16 * tile * 2
    return max(1, min(launch.programs_per_sm, shared_per_sm // (shared + 1024)))


def flat_num_splits(rows: int, num_kv_heads: int, max_tiles: int, slots: int) -> int:
    """Splits per (request, KV head) for the flat kernel on `slots` programs: the fewest
    whose busiest program's share of a context, ceil(items / slots) / splits, is within 3%
    of the best of 1 to 8 splits (splits cost partial writes and a merge). Shapes only."""
    def load(splits):
        return cdiv(rows * num_kv_heads * splits, slots) / splits
    choices = range(1, max(1, min(8, max_tiles)) + 1)
    best = min(load(s) for s in choices)
    return next(s for s in choices if load(s) <= 1.03 * best)


def flat_maxnreg(launch) -> int | None:
    """The launch's register cap, or, if it has none, the most registers per thread that let
    programs_per_sm programs share an SM's 65,536 (the grid assumes they all fit)."""
    if launch.maxnreg is not None:
        return launch.maxnreg
    fit = 65536 // (launch.programs_per_sm * launch.num_warps * 32) // 8 * 8
    return None if fit >= 255 else fit


def flat_refusal(quant: bool, v_transposed: bool, launch, head_dim: int,
                 block_size: int) -> str | None:
    """Why the flat kernel cannot run this launch (programs_per_sm set), or None."""
    if not (quant and v_transposed):
        return ("programs_per_sm (the flat decode kernel): for an fp8 cache with V stored "
                "transposed (fp8.transposed_v_view)")
    if launch.operand not in (torch.float16, torch.bfloat16, torch.float32):
        return (f"programs_per_sm: the flat kernel takes f16, bf16 or f32 operands, not "
                f"{launch.operand}")
    if block_size % launch.tile_n or head_dim & (head_dim - 1) or head_dim < 16:
        return (f"programs_per_sm: tile_n {launch.tile_n} must divide the block size "
                f"{block_size} and head dim {head_dim} be a power of two >= 16")
    return None


def paged_decode_flat(q, k_cache, v_cache, k_scale, v_scale, block_tables, context_lens,
                      scale, out, scratch, num_splits, programs, launch, stride_v_head):
    """paged_decode_attention on an FP8 cache with V stored transposed, by the flat kernel.

    q: (B, H_q, D), D a power of two >= 16; k_cache (NB, b, H_kv, D) e4m3, v_cache its
    fp8.transposed_v_view; k/v_scale float32 (NB, b, H_kv); block_tables int32 (B, W);
    context_lens int32 (B,); out (B, H_q, D); scratch: paged_decode.decode_scratch(B, H_q,
    D, num_splits); programs: the grid (flat_programs); launch: an fp8_launch.Launch that
    flat_refusal accepts; stride_v_head: v_cache's KV-head stride (fp8.v_layout). Writes out (num_splits 1) or the partials of scratch, which
    paged_decode's merge kernel combines; returns out."""
    B, H_q, D = q.shape
    _, bs, H_kv, _ = k_cache.shape
    G = H_q // H_kv
    num_items = B * H_kv * num_splits
    if num_items > ITEMS_PAD * programs:
        raise ValueError(f"flat decode: {num_items} items over {programs} programs; at most "
                         f"{ITEMS_PAD} each")
    partial_out, partial_max, partial_sum = scratch
    maxnreg = flat_maxnreg(launch)
    _flat_kernel[(programs,)](
        q, k_cache, v_cache, k_scale, v_scale, block_tables, context_lens, partial_out,
        partial_max, partial_sum, out, scale * LOG2E, q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), stride_v_head,
        block_tables.stride(0), out.stride(0), out.stride(1), H_q, H_kv, num_splits,
        num_items, programs, DIRECT=num_splits == 1, GROUP=G, HEAD_DIM=D, BLOCK_SIZE=bs,
        TILE_N=launch.tile_n, GROUP_PAD=max(16, next_pow2(G)), **dot_args(launch.operand),
        ITEMS=ITEMS_PAD, num_warps=launch.num_warps, num_stages=launch.num_stages,
        **({} if maxnreg is None else {"maxnreg": maxnreg}))
    return out
