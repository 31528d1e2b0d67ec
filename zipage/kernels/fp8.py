"""FP8 (e4m3) KV cache: per-(token, KV head) scales, quantise on write, dequantise on load.

A cache row (one token, one KV head, D elements) is stored as q = round_e4m3(x / s) with
s = amax(|x|) / 448 (float32, one per row), and read back as q * s. Scales live in a tensor
with the cache's shape minus D, laid out like the cache, so a row at element offset o of
the cache has its scale at offset o // D of the scale tensor: every kernel finds a scale
from the offset it already computed, and anything that moves a slot (compaction) moves its
scale with it. docs/fp8.md gives the measurements behind this granularity.
"""
import torch

FP8_DTYPE = torch.float8_e4m3fn
FP8_MAX = 448.0
INV_FP8_MAX = 1.0 / FP8_MAX  # rounded to fp32 in both the kernel and the reference
SCALE_DTYPE = torch.float32
KV_CACHE_DTYPES = ("auto", "fp8")


def is_fp8(cache: torch.Tensor) -> bool:
    return cache.dtype == FP8_DTYPE


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
    if tuple(scale.shape) != tuple(cache.shape[:-1]) or cache.stride(-1) != 1 or \
            tuple(cache.stride()[:-1]) != tuple(D * s for s in scale.stride()):
        raise ValueError("scale tensor must have the cache's shape without D and its layout "
                         "(offset // D)")
    return True


def quantize_reference(x: torch.Tensor):
    """(q, scale): x (..., D) as e4m3 values and float32 scales (...), per row of D."""
    x = x.float()
    scale = x.abs().amax(-1) * torch.tensor(INV_FP8_MAX, dtype=torch.float32)
    inv = torch.where(scale > 0, 1.0 / scale, torch.zeros_like(scale))
    q = (x * inv[..., None]).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE)
    return q, scale


def dequantize_reference(q: torch.Tensor, scale: torch.Tensor | None) -> torch.Tensor:
    """float32 values of cache rows q (..., D); scale None: a full-precision cache."""
    return q.float() if scale is None else q.float() * scale[..., None]


def dot_dtype(cache_dtype: torch.dtype, compute_dtype: torch.dtype) -> torch.dtype:
    """Operand type of the kernels' dots: the cache dtype, or for FP8 the model dtype."""
    return compute_dtype if cache_dtype == FP8_DTYPE else cache_dtype
