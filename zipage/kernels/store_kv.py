"""Scatter new K/V rows into the paged cache (and generic row scatter for the query ring).

Each program copies one TILE-wide column tile of one source row to its destination row;
rows whose index is -1 are skipped (padding tokens, or tokens that need no write).
An FP8 cache (zipage/kernels/fp8.py) is written by one program per token that quantises all
its KV heads (each head's row needs its own amax) and stores their scales.
"""
import torch

from zipage.kernels._dispatch import cdiv, next_pow2, tl, triton, use_triton
from zipage.kernels.fp8 import FP8_MAX, INV_FP8_MAX, check_scales, quantize_reference, v_layout
from zipage.kernels.paged_tiles import INTERPRETER

_FP8_MAX = tl.constexpr(FP8_MAX)  # jit code may read only constexpr globals
_INV_FP8_MAX = tl.constexpr(INV_FP8_MAX)
_MAX_TILE = 2048  # row tile (elements); wider rows use several programs


@triton.jit
def _copy_row(src_ptr, dst_ptr, src_row, dst_row, stride_src_row, stride_dst_row, row_width,
              cols):
    if dst_row >= 0:  # -1: skip (a branch, not a mask: no traffic for skipped rows)
        mask = cols < row_width
        x = tl.load(src_ptr + src_row * stride_src_row + cols, mask=mask)
        tl.store(dst_ptr + dst_row * stride_dst_row + cols, x.to(dst_ptr.dtype.element_ty),
                 mask=mask)


@triton.jit
def _store_rows_kernel(src_ptr, dst_ptr, index_ptr, stride_src_row, stride_dst_row, row_width,
                       TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * TILE + tl.arange(0, TILE)
    dst_row = tl.load(index_ptr + row).to(tl.int64)  # int64: caches exceed 2**31 elements
    _copy_row(src_ptr, dst_ptr, row, dst_row, stride_src_row, stride_dst_row, row_width, cols)


@triton.jit
def _store_kv_kernel(key_ptr, value_ptr, k_cache_ptr, v_cache_ptr, slot_mapping_ptr,
                     stride_key_row, stride_value_row, row_width, TILE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * TILE + tl.arange(0, TILE)
    slot = tl.load(slot_mapping_ptr + row).to(tl.int64)
    # cache rows are (H_kv * D) contiguous elements, one per flat slot
    _copy_row(key_ptr, k_cache_ptr, row, slot, stride_key_row, row_width, row_width, cols)
    _copy_row(value_ptr, v_cache_ptr, row, slot, stride_value_row, row_width, row_width, cols)


@triton.jit
def round_to_e4m3(x):
    """fp32 x (|x| <= 448) rounded to nearest even on the e4m3 grid, still fp32. Only for
    the interpreter, whose fp32 -> fp8 cast mis-rounds (126.7 -> 64, ties away from even);
    compiled kernels cast in hardware (round to nearest even, as torch)."""
    bits = x.to(tl.uint32, bitcast=True)
    normal = (bits + 0x7FFFF + ((bits >> 20) & 1)) & 0xFFF00000  # keep 3 mantissa bits
    magic = 12582912.0  # 1.5 * 2**23: adding and subtracting it rounds to an integer (RNE)
    sub = ((tl.abs(x) * 512.0 + magic) - magic) / 512.0  # below 2**-6 the step is 2**-9
    sub = sub.to(tl.uint32, bitcast=True) | (bits & 0x80000000)  # keep the sign of zero
    return tl.where(tl.abs(x) < 0.015625, sub, normal).to(tl.float32, bitcast=True)


@triton.jit
def _quantize_row(src_ptr, cache_ptr, scale_ptr, src_row, slot, stride_src_row, heads, cols,
                  num_heads, HEAD_DIM: tl.constexpr, BLOCK_SIZE: tl.constexpr,
                  TRANSPOSED: tl.constexpr):
    """Quantise one token's (heads, D) tile to e4m3 with a scale per head, at `slot` (of a
    cache in rows, or TRANSPOSED: fp8.transposed_v_view's layout, D elements b apart)."""
    if slot >= 0:
        head_ok = heads < num_heads
        mask = head_ok[:, None] & (cols[None, :] < HEAD_DIM)
        offsets = heads[:, None] * HEAD_DIM + cols[None, :]
        x = tl.load(src_ptr + src_row * stride_src_row + offsets, mask=mask, other=0.0)
        x = x.to(tl.float32)
        scale = tl.max(tl.abs(x), 1) * _INV_FP8_MAX
        has_nan = tl.max((x != x).to(tl.int32), 1) > 0
        scale = tl.where(has_nan, float("nan"), scale)  # as torch's amax: the row reads NaN
        inv = tl.where(scale > 0, tl.div_rn(tl.full(scale.shape, 1.0, tl.float32),
                                            tl.where(scale > 0, scale, 1.0)), 0.0)
        q = x * inv[:, None]
        q = tl.clamp(tl.where(q == q, q, 0.0), -_FP8_MAX, _FP8_MAX)  # no NaN byte stored
        if INTERPRETER:
            q = round_to_e4m3(q)
        if TRANSPOSED:
            block_start = slot // BLOCK_SIZE * BLOCK_SIZE * num_heads * HEAD_DIM
            dst = block_start + slot % BLOCK_SIZE + offsets * BLOCK_SIZE
        else:
            dst = slot * num_heads * HEAD_DIM + offsets
        tl.store(cache_ptr + dst, q.to(cache_ptr.dtype.element_ty), mask=mask)
        tl.store(scale_ptr + slot * num_heads + heads, scale, mask=head_ok)


@triton.jit
def _store_kv_fp8_kernel(key_ptr, value_ptr, k_cache_ptr, v_cache_ptr, k_scale_ptr,
                         v_scale_ptr, slot_mapping_ptr, stride_key_row, stride_value_row,
                         num_heads, HEAD_DIM: tl.constexpr, HEADS_PAD: tl.constexpr,
                         HEAD_DIM_PAD: tl.constexpr, BLOCK_SIZE: tl.constexpr,
                         V_T: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    slot = tl.load(slot_mapping_ptr + row).to(tl.int64)
    heads = tl.arange(0, HEADS_PAD)
    cols = tl.arange(0, HEAD_DIM_PAD)
    _quantize_row(key_ptr, k_cache_ptr, k_scale_ptr, row, slot, stride_key_row, heads, cols,
                  num_heads, HEAD_DIM, BLOCK_SIZE, False)
    _quantize_row(value_ptr, v_cache_ptr, v_scale_ptr, row, slot, stride_value_row, heads,
                  cols, num_heads, HEAD_DIM, BLOCK_SIZE, V_T)


def _as_rows(x: torch.Tensor) -> torch.Tensor:
    """(N, ...) -> (N, R) with unit inner stride (a view when possible, e.g. a qkv slice)."""
    x = x.reshape(x.shape[0], -1)
    return x if x.stride(-1) == 1 else x.contiguous()


def _launch_config(row_width: int):
    tile = min(next_pow2(row_width), _MAX_TILE)
    return tile, cdiv(row_width, tile), (4 if tile >= 512 else 1)


def store_kv(key, value, k_cache, v_cache, slot_mapping, k_scale=None, v_scale=None):
    """Write new keys/values into the paged KV cache, in place.

    key, value:     (N, H_kv, D), any float dtype (cast to the cache dtype); the token
                    dimension may be strided (e.g. a slice of a fused qkv tensor).
    k_cache/v_cache: (NB, b, H_kv, D), contiguous; an fp8 V cache may instead be
                    fp8.transposed_v_view's (the engine's).
    slot_mapping:   int64 (N,), flat slot = block * b + offset; -1 = skip this row.
    k/v_scale:      float32 (NB, b, H_kv) contiguous, for an fp8 cache (else None): each
                    written (token, head) row gets its scale amax / 448 there.
    """
    if not use_triton(key):
        return store_kv_reference(key, value, k_cache, v_cache, slot_mapping, k_scale, v_scale)
    n = key.shape[0]
    if n == 0:
        return
    k2, v2 = _as_rows(key), _as_rows(value)
    R = k2.shape[1]
    if check_scales(k_cache, k_scale) | check_scales(v_cache, v_scale):
        assert k_cache.is_contiguous() and k_scale.is_contiguous() and v_scale.is_contiguous()
        v_transposed, _ = v_layout(k_cache, v_cache)  # else V has K's (contiguous) strides
        b, H, D = k_cache.shape[-3:]
        _store_kv_fp8_kernel[(n,)](k2, v2, k_cache, v_cache, k_scale, v_scale, slot_mapping,
                                   k2.stride(0), v2.stride(0), H, HEAD_DIM=D,
                                   HEADS_PAD=next_pow2(H), HEAD_DIM_PAD=next_pow2(D),
                                   BLOCK_SIZE=b, V_T=v_transposed, num_warps=4)
        return
    kc, vc = k_cache.view(-1, R), v_cache.view(-1, R)  # view: fails loudly if not contiguous
    tile, num_tiles, warps = _launch_config(R)
    _store_kv_kernel[(n, num_tiles)](k2, v2, kc, vc, slot_mapping, k2.stride(0), v2.stride(0),
                                     R, TILE=tile, num_warps=warps)


def store_rows(src, dst, index):
    """Scatter rows in place: dst[index[i]] = src[i] for index[i] >= 0.

    src:   (N, R), unit inner stride preferred (copied otherwise).
    dst:   (S, R) with unit inner stride; may be a view, e.g.
           query_cache[l].view(M * W, H_q * D) for the query ring buffer.
    index: int32/int64 (N,), -1 = skip.
    """
    if not use_triton(src):
        return store_rows_reference(src, dst, index)
    n = src.shape[0]
    if n == 0:
        return
    assert dst.dim() == 2 and dst.stride(1) == 1, "dst must be (S, R) with unit inner stride"
    src = _as_rows(src)
    R = dst.shape[1]
    assert src.shape[1] == R
    tile, num_tiles, warps = _launch_config(R)
    _store_rows_kernel[(n, num_tiles)](src, dst, index, src.stride(0), dst.stride(0), R,
                                       TILE=tile, num_warps=warps)


def store_rows_reference(src, dst, index):
    """PyTorch version of store_rows (boolean indexing: syncs on CUDA; not graph-safe)."""
    keep = index >= 0
    dst[index[keep].long()] = src.reshape(src.shape[0], -1)[keep].to(dst.dtype)


def store_kv_reference(key, value, k_cache, v_cache, slot_mapping, k_scale=None,
                       v_scale=None):
    """PyTorch version of store_kv."""
    R = k_cache.shape[-2] * k_cache.shape[-1]
    if check_scales(k_cache, k_scale) | check_scales(v_cache, v_scale):
        b, H = k_cache.shape[-3:-1]
        keep = slot_mapping >= 0
        slots = slot_mapping[keep].long()
        for x, cache, scale in ((key, k_cache, k_scale), (value, v_cache, v_scale)):
            q, s = quantize_reference(x[keep])
            # indexed by (block, offset): also right for a V cache stored transposed
            cache.view(torch.uint8)[slots // b, slots % b] = q.view(torch.uint8)
            store_rows_reference(s, scale.view(-1, H), slot_mapping[keep])
        return
    store_rows_reference(key, k_cache.view(-1, R), slot_mapping)
    store_rows_reference(value, v_cache.view(-1, R), slot_mapping)
