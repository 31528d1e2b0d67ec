"""Scatter new K/V rows into the paged cache (and generic row scatter for the query ring).

Each program copies one TILE-wide column tile of one source row to its destination row;
rows whose index is -1 are skipped (padding tokens, or tokens that need no write).
"""
import torch

from zipage.kernels._dispatch import cdiv, next_pow2, tl, triton, use_triton

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


def _as_rows(x: torch.Tensor) -> torch.Tensor:
    """(N, ...) -> (N, R) with unit inner stride (a view when possible, e.g. a qkv slice)."""
    x = x.reshape(x.shape[0], -1)
    return x if x.stride(-1) == 1 else x.contiguous()


def _launch_config(row_width: int):
    tile = min(next_pow2(row_width), _MAX_TILE)
    return tile, cdiv(row_width, tile), (4 if tile >= 512 else 1)


def store_kv(key, value, k_cache, v_cache, slot_mapping):
    """Write new keys/values into the paged KV cache, in place.

    key, value:     (N, H_kv, D), any float dtype (cast to the cache dtype); the token
                    dimension may be strided (e.g. a slice of a fused qkv tensor).
    k_cache/v_cache: (NB, b, H_kv, D), contiguous.
    slot_mapping:   int64 (N,), flat slot = block * b + offset; -1 = skip this row.
    """
    if not use_triton(key):
        return store_kv_reference(key, value, k_cache, v_cache, slot_mapping)
    n = key.shape[0]
    if n == 0:
        return
    k2, v2 = _as_rows(key), _as_rows(value)
    R = k2.shape[1]
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


def store_kv_reference(key, value, k_cache, v_cache, slot_mapping):
    """PyTorch version of store_kv."""
    R = k_cache.shape[-2] * k_cache.shape[-1]
    store_rows_reference(key, k_cache.view(-1, R), slot_mapping)
    store_rows_reference(value, v_cache.view(-1, R), slot_mapping)
