"""Compaction of kept KV (and global score) into the target blocks (docs/method.md §7).

For each (layer, request, KV head) the kept slots j (in increasing order) move to target
positions p = 0, 1, ... (block target[p // b], offset p % b). One program per
(KV head, request, layer) walks the sequence in chunks of TILE slots: it loads the chunk's
keep flags, gets each destination from an exclusive prefix sum (tl.cumsum), loads the kept
rows, then stores them. Unlike the reference's serial slot-by-slot copy, a chunk moves at once.

In-place safety (targets may alias sources): every target block that receives tokens is
either source block i of the same request or a block this compaction never reads (fresh).
Since p <= j, a store only overwrites source positions <= the chunk's last slot, and later
chunks read later positions. Within a chunk warps run unsynchronised, so a barrier separates
the loads from the stores (and the launch disables async prefetching across it).
An FP8 cache's scales (fp8.py: at offset // D) move with their rows, in the same chunk.
V stored transposed moves as a (slots, D) tile too: Triton then lays a warp along the slots,
its contiguous bytes (written (D, slots), Triton 3.6 put a warp along D, 256 bytes apart).
"""
import torch

from zipage.kernels._dispatch import next_pow2, tl, triton
from zipage.kernels.block_tables import check_tables, flat_slots
from zipage.kernels.fp8 import check_scales, v_layout
from zipage.kernels.paged_tiles import paged_block_offsets, paged_offsets

_TILE = 64  # slots per chunk


@triton.jit(do_not_specialize=["stride_table_row"])
def _compact_kernel(k_cache_ptr, v_cache_ptr, k_scale_ptr, v_scale_ptr, keep_ptr, score_ptr,
                    score_cache_ptr,
                    block_tables_ptr, target_tables_ptr, phys_lens_ptr, stride_k_layer,
                    stride_k_block, stride_k_slot, stride_k_head, stride_v_head,
                    stride_keep_layer,
                    stride_keep_req, stride_keep_head, stride_score_layer, stride_score_block,
                    stride_score_slot, stride_score_head, stride_table_row, stride_target_row,
                    HEAD_DIM: tl.constexpr, BLOCK_SIZE: tl.constexpr, SCORE: tl.constexpr,
                    TILE: tl.constexpr, HEAD_DIM_PAD: tl.constexpr, QUANT: tl.constexpr,
                    V_T: tl.constexpr):
    kv_head = tl.program_id(0)
    req = tl.program_id(1)
    layer = tl.program_id(2).to(tl.int64)
    n = tl.load(phys_lens_ptr + req)
    cols = tl.arange(0, HEAD_DIM_PAD)
    col_ok = cols[None, :] < HEAD_DIM
    kv_head_offset = layer * stride_k_layer + kv_head * stride_k_head
    v_head_offset = layer * stride_k_layer + kv_head * stride_v_head
    score_head_offset = layer * stride_score_layer + kv_head * stride_score_head
    table_row = block_tables_ptr + req * stride_table_row
    target_row = target_tables_ptr + req * stride_target_row
    # keep flags and the score S share this layout
    row = layer * stride_keep_layer + req * stride_keep_req + kv_head * stride_keep_head
    done = n * 0  # kept slots seen so far = next target position (int32 scalar)
    for start in range(0, n, TILE):
        j = start + tl.arange(0, TILE)
        j_ok = j < n
        flag = tl.load(keep_ptr + row + j, mask=j_ok, other=0).to(tl.int32)
        p = done + tl.cumsum(flag, 0) - flag  # exclusive prefix sum
        done += tl.sum(flag, 0)
        kept = j_ok & (flag != 0)
        src_block, src_slot = paged_block_offsets(table_row, j, j_ok, stride_k_block,
                                                  BLOCK_SIZE)
        dst_block, dst_slot = paged_block_offsets(target_row, p, kept, stride_k_block,
                                                  BLOCK_SIZE)
        src = kv_head_offset + src_block + src_slot * stride_k_slot
        dst = kv_head_offset + dst_block + dst_slot * stride_k_slot
        moved = kept & (src != dst)  # a kept slot already in place needs no copy
        mask = moved[:, None] & col_ok
        k = tl.load(k_cache_ptr + src[:, None] + cols[None, :], mask=mask)
        if V_T:  # V stored transposed (fp8.transposed_v_view): slot stride 1, D stride b
            v_src = v_head_offset + src_block + src_slot
            v_dst = v_head_offset + dst_block + dst_slot
            v = tl.load(v_cache_ptr + v_src[:, None] + cols[None, :] * BLOCK_SIZE, mask=mask)
        else:
            v = tl.load(v_cache_ptr + src[:, None] + cols[None, :], mask=mask)
        if QUANT:
            k_scale = tl.load(k_scale_ptr + src // HEAD_DIM, mask=moved)
            v_scale = tl.load(v_scale_ptr + src // HEAD_DIM, mask=moved)
        tl.debug_barrier()  # every load of the chunk lands before any store may overwrite it
        tl.store(k_cache_ptr + dst[:, None] + cols[None, :], k, mask=mask)
        if V_T:
            tl.store(v_cache_ptr + v_dst[:, None] + cols[None, :] * BLOCK_SIZE, v, mask=mask)
        else:
            tl.store(v_cache_ptr + dst[:, None] + cols[None, :], v, mask=mask)
        if QUANT:
            tl.store(k_scale_ptr + dst // HEAD_DIM, k_scale, mask=moved)
            tl.store(v_scale_ptr + dst // HEAD_DIM, v_scale, mask=moved)
        if SCORE:
            score = tl.load(score_ptr + row + j, mask=kept)
            dst_score = score_head_offset + paged_offsets(
                target_row, p, kept, stride_score_block, stride_score_slot, BLOCK_SIZE)
            tl.store(score_cache_ptr + dst_score,
                     score.to(score_cache_ptr.dtype.element_ty), mask=kept)


def compact(k_cache, v_cache, keep, block_tables, target_tables, phys_lens, score=None,
            score_cache=None, k_scale=None, v_scale=None):
    """Move kept K/V (and scores) to target positions 0..K-1, in place (Triton).

    k_cache, v_cache: (L, NB, b, H_kv, D), identical strides, last dim contiguous (an fp8
                   V cache may be fp8.transposed_v_view's)
    keep:          uint8 (L, B, H_kv, n_max * b) contiguous, 1 = keep; the same count K per
                   (layer, request, head) and 0 at slots >= phys_len
    block_tables:  int32 (B, n_max) source tables, -1 padded;  phys_lens: int32 (B,)
    target_tables: int32 (B, T) with T * b >= K; block i is source block i or a fresh block
    score:         float32 like keep (global score S per slot) or None
    score_cache:   (L, NB, b, H_kv): receives score at the target slots, or None
    k/v_scale:     float32 (L, NB, b, H_kv) scales of an fp8 cache (moved with their rows)
    """
    L, NB, b, H, D = k_cache.shape
    check_tables(block_tables, phys_lens)
    v_transposed, stride_v_head = v_layout(k_cache, v_cache)
    assert keep.is_contiguous() and keep.dtype == torch.uint8
    assert target_tables.dtype == torch.int32
    B = block_tables.shape[0]
    quant = check_scales(k_cache, k_scale) | check_scales(v_cache, v_scale)
    with_score = score_cache is not None
    if with_score:
        assert score is not None and score.shape == keep.shape and score.stride() == keep.stride()
    ssc = score_cache.stride() if with_score else (0, 0, 0, 0)
    _compact_kernel[(H, B, L)](
        k_cache, v_cache, k_scale if quant else keep, v_scale if quant else keep, keep,
        score if with_score else keep, score_cache if with_score else keep, block_tables, target_tables, phys_lens,
        *k_cache.stride()[:4], stride_v_head, *keep.stride()[:3], *ssc, block_tables.stride(0),
        target_tables.stride(0), HEAD_DIM=D, BLOCK_SIZE=b, SCORE=with_score, TILE=_TILE,
        HEAD_DIM_PAD=next_pow2(D), QUANT=quant, V_T=v_transposed,
        num_warps=4, num_stages=1)  # no prefetch past the barrier


def compact_reference(k_cache, v_cache, keep, block_tables, target_tables, phys_lens,
                      score=None, score_cache=None, k_scale=None, v_scale=None):
    """PyTorch version of compact: gather the kept rows into a temporary, then scatter."""
    L, NB, b, H, D = k_cache.shape
    dev = k_cache.device
    li = torch.arange(L, device=dev)[:, None, None]
    hi = torch.arange(H, device=dev)[None, :, None]
    caches = [k_cache, v_cache]  # indexed by (block, offset): V may be stored transposed
    if check_scales(k_cache, k_scale) | check_scales(v_cache, v_scale):
        caches += [k_scale, v_scale]
    if score_cache is not None:
        caches.append(score_cache)
    for s in range(block_tables.shape[0]):
        n = int(phys_lens[s])
        flags = keep[:, s, :, :n].bool()  # (L, H, n)
        counts = flags.sum(-1)
        K = int(counts[0, 0])
        assert bool((counts == K).all()), "keep must select the same count per (layer, head)"
        # stable descending sort of the flags lists the kept positions first, in order
        idx = torch.sort(flags.to(torch.uint8), dim=-1, descending=True, stable=True)
        pos = idx.indices[..., :K]  # (L, H, K) increasing kept positions
        src = flat_slots(block_tables[s], n, b)[pos]
        dst = flat_slots(target_tables[s], K, b)[None, None, :]
        moved = caches[:-1] if score_cache is not None else caches
        rows = [c[li, src // b, src % b, hi].clone() for c in moved]  # gather everything first
        if score_cache is not None:
            rows.append(score[:, s].gather(-1, pos).to(score_cache.dtype))
        for c, r in zip(caches, rows):
            c[li, dst // b, dst % b, hi] = r
