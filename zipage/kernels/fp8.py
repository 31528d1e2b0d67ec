"""FP8 (e4m3) KV cache: per-(token, KV head) scales, quantise on write, dequantise on load.

A cache row (one token, one KV head, D elements) is stored as q = round_e4m3(x / s) with
s = amax(|x|) / 448 (float32, one per row), and read back as q * s. Scales live in a tensor
with the cache's shape minus D, laid out like the cache, so a row at element offset o of
the cache has its scale at offset o // D of the scale tensor: every kernel finds a scale
from the offset it already computed, and anything that moves a slot (compaction) moves its
scale with it. docs/fp8.md gives the measurements behind this granularity.

The engine's FP8 V cache is stored transposed per block (transposed_v_view): a block's bytes
are (H_kv, D, b), keys contiguous, so dot(P, V), which contracts over keys, reads V's tile
the way dot(Q, K^T) reads K's (an 8-bit operand cannot be transposed on its way from shared
memory to the tensor cores). The view keeps the logical shape (..., NB, b, H_kv, D): torch
code indexes it like any cache; kernels take its strides. Its scales keep the row layout, so
a V row's scale sits where the K row's does (the K offset // D).
"""
import torch

FP8_DTYPE = torch.float8_e4m3fn
FP8_MAX = 448.0
INV_FP8_MAX = 1.0 / FP8_MAX  # rounded to fp32 in both the kernel and the reference
SCALE_DTYPE = torch.float32
KV_CACHE_DTYPES = ("auto", "fp8")


def is_fp8(cache: torch.Tensor) -> bool:
    return cache.dtype == FP8_DTYPE


def transposed_v_view(storage: torch.Tensor) -> torch.Tensor:
    """A contiguous (..., NB, b, H_kv, D) tensor seen as a V cache stored transposed per
    block: same logical shape, element (n, t, h, d) at n*b*H*D + (h*D + d)*b + t."""
    *lead, NB, b, H, D = storage.shape
    assert storage.is_contiguous()
    n = len(lead)
    return storage.view(*lead, NB, H, D, b).permute(*range(n), n, n + 3, n + 1, n + 2)


def copy_to_transposed_v(v_cache: torch.Tensor) -> torch.Tensor:
    """A copy of a V cache (..., NB, b, H_kv, D) in transposed_v_view's layout."""
    return transposed_v_view(torch.empty(v_cache.shape, dtype=v_cache.dtype,
                                         device=v_cache.device)).copy_(v_cache)


def kv_views(kv_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(K, V) caches of a contiguous (2, ..., NB, b, H_kv, D) allocation: an FP8 V cache is
    stored transposed per block (transposed_v_view), any other V as K."""
    v = kv_cache[1]
    return kv_cache[0], transposed_v_view(v) if is_fp8(v) else v


def is_v_transposed(cache: torch.Tensor) -> bool:
    """True for a cache in transposed_v_view's layout (slot stride 1, D stride b)."""
    b = cache.shape[-3]
    return cache.stride(-3) == 1 and cache.stride(-1) == b and b > 1


def v_layout(k_cache: torch.Tensor, v_cache: torch.Tensor) -> tuple[bool, int]:
    """(V stored transposed?, V's KV-head stride) of a K/V cache pair (..., NB, b, H_kv, D),
    as the attention kernels take them: K in rows (unit D stride), V either in K's layout
    or, for an FP8 cache, in transposed_v_view's with K's block stride."""
    assert k_cache.shape == v_cache.shape and k_cache.stride(-1) == 1
    if is_v_transposed(v_cache):
        assert is_fp8(v_cache), "V stored transposed is an fp8 cache's layout"
        assert v_cache.stride()[:-3] == k_cache.stride()[:-3], "K and V need one block stride"
        return True, v_cache.stride(-2)
    assert v_cache.stride() == k_cache.stride(), "K and V caches need the same strides"
    return False, k_cache.stride(-2)


def check_scales(cache: torch.Tensor, scale: torch.Tensor | None) -> bool:
    """True if `cache` is an FP8 cache with the matching `scale` tensor; False for a
    full-precision cache without scales; an error for anything in between."""
    if scale is None:
        if is_fp8(cache):
            raise ValueError("an fp8 KV cache needs its scale tensor")
        return False
    D = cache.shape[-1]
    if not is_fp8(cache) or scale.dtype != SCALE_DTYPE:
        raise ValueError(f"scales need an fp8 cache and float32 scales, got {cache.dtype} and "
                         f"{scale.dtype}")
    transposed = is_v_transposed(cache)  # its scales keep the row layout
    row_strides = tuple(cache.stride()[:-3]) + (cache.shape[-2] * D, D) if transposed else \
        tuple(cache.stride()[:-1])
    if tuple(scale.shape) != tuple(cache.shape[:-1]) or \
            (cache.stride(-1) != 1 and not transposed) or \
            row_strides != tuple(D * s for s in scale.stride()):
        raise ValueError("scale tensor must have the cache's shape without D and its layout "
                         "(offset // D)")
    return True


def quantize_reference(x: torch.Tensor):
    """(q, scale): x (..., D) as e4m3 values and float32 scales (...), per row of D.

    A row holding NaN gets scale NaN (it reads back as NaN) and q 0: no NaN byte is ever
    stored, so a stale slot past a context is finite and the kernels may read it with weight
    0 (fp8_tiles.load_fp8_vt_tile)."""
    x = x.float()
    scale = x.abs().amax(-1) * torch.tensor(INV_FP8_MAX, dtype=torch.float32)
    inv = torch.where(scale > 0, 1.0 / scale, torch.zeros_like(scale))
    q = (x * inv[..., None]).clamp(-FP8_MAX, FP8_MAX).nan_to_num(nan=0.0).to(FP8_DTYPE)
    return q, scale


def dequantize_reference(q: torch.Tensor, scale: torch.Tensor | None) -> torch.Tensor:
    """float32 values of cache rows q (..., D); scale None: a full-precision cache."""
    return q.float() if scale is None else q.float() * scale[..., None]


def dot_dtype(cache_dtype: torch.dtype, compute_dtype: torch.dtype) -> torch.dtype:
    """Operand type of the kernels' dots: the cache dtype, or for FP8 the model dtype."""
    return compute_dtype if cache_dtype == FP8_DTYPE else cache_dtype
