"""Scatter new K/V rows into the paged cache (and generic row scatter for the query ring).

Each program copies one BLOCK-wide column tile of one source row to its destination row;
rows whose index is -1 are skipped (padding tokens, or tokens that need no write).
"""
import torch

from zipage.kernels._dispatch import cdiv, next_pow2, tl, triton, use_triton

_MAX_BLOCK = 2048  # row tile (elements); wider rows use several programs


@triton.jit
def _copy_row(src, dst, row, target, src_stride, dst_stride, R, col):
    if target >= 0:  # -1: skip (a branch, not a mask: no traffic for skipped rows)
        mask = col < R
        x = tl.load(src + row * src_stride + col, mask=mask)
        tl.store(dst + target * dst_stride + col, x.to(dst.dtype.element_ty), mask=mask)


@triton.jit
def _store_rows_kernel(src, dst, index, src_stride, dst_stride, R, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    col = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    target = tl.load(index + row).to(tl.int64)  # int64 offsets: caches exceed 2**31 elements
    _copy_row(src, dst, row, target, src_stride, dst_stride, R, col)


@triton.jit
def _store_kv_kernel(key, value, k_cache, v_cache, slots, k_stride, v_stride, R,
                     BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    col = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    slot = tl.load(slots + row).to(tl.int64)
    # cache rows are (H_kv * D) contiguous elements, one per flat slot
    _copy_row(key, k_cache, row, slot, k_stride, R, R, col)
    _copy_row(value, v_cache, row, slot, v_stride, R, R, col)


def _as_rows(x: torch.Tensor) -> torch.Tensor:
    """(N, ...) -> (N, R) with unit inner stride (a view when possible, e.g. a qkv slice)."""
    x = x.reshape(x.shape[0], -1)
    return x if x.stride(-1) == 1 else x.contiguous()


def _launch_cfg(R: int):
    block = min(next_pow2(R), _MAX_BLOCK)
    return block, cdiv(R, block), (4 if block >= 512 else 1)


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
    block, ntiles, warps = _launch_cfg(R)
    _store_kv_kernel[(n, ntiles)](k2, v2, kc, vc, slot_mapping, k2.stride(0), v2.stride(0), R,
                                  BLOCK=block, num_warps=warps)


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
    block, ntiles, warps = _launch_cfg(R)
    _store_rows_kernel[(n, ntiles)](src, dst, index, src.stride(0), dst.stride(0), R,
                                    BLOCK=block, num_warps=warps)


def store_rows_reference(src, dst, index):
    """PyTorch version of store_rows (boolean indexing: syncs on CUDA; not graph-safe)."""
    keep = index >= 0
    dst[index[keep].long()] = src.reshape(src.shape[0], -1)[keep].to(dst.dtype)


def store_kv_reference(key, value, k_cache, v_cache, slot_mapping):
    """PyTorch version of store_kv."""
    R = k_cache.shape[-2] * k_cache.shape[-1]
    store_rows_reference(key, k_cache.view(-1, R), slot_mapping)
    store_rows_reference(value, v_cache.view(-1, R), slot_mapping)
