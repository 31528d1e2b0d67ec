"""Orthonormal Hadamard rotation of queries and keys for an FP8 KV cache.

e4m3 keeps about 3 significant bits per element. A few channels of each key (often the
slow RoPE frequencies) carry most of q.k, so most of the rounding error of a logit comes
from those few channels. Rotating q and k by the same orthonormal H (H = H^T, H H = I)
leaves every q.k, key norm and key-key cosine unchanged, and spreads each key's energy
over all D channels, where the independent rounding errors average out
(docs/fp8.md, "Keys rotated before e4m3"). V is not rotated: it enters no dot with q.
"""
import functools
import warnings

import torch


@functools.lru_cache(maxsize=None)
def _hadamard_cpu(d: int) -> torch.Tensor:
    if d < 1 or d & (d - 1):
        raise ValueError(f"key rotation needs a power-of-two head_dim, got {d}")
    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < d:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h / d ** 0.5


def hadamard(d: int, dtype: torch.dtype, device) -> torch.Tensor:
    """(d, d) symmetric orthonormal Sylvester-Hadamard matrix; d a power of two."""
    return _hadamard_cpu(d).to(dtype=dtype, device=device)


def rotate(x: torch.Tensor, h: torch.Tensor | None = None) -> torch.Tensor:
    """x (..., D) times h (D, D), in x's dtype; h None: hadamard(D) (built on each call, so
    pass h in code a CUDA graph captures)."""
    d = x.shape[-1]
    h = hadamard(d, x.dtype, x.device) if h is None else h
    return (x.reshape(-1, d) @ h).reshape(x.shape)


def rotates_keys(cfg, head_dim: int) -> bool:
    """Whether the engine rotates q and k (EngineConfig.rotates_keys; the rotation is fused
    into zipage/kernels/qk_rotary.py). By default a head_dim that is not a power of two keeps
    keys unrotated; asked for, it is an error."""
    if not cfg.rotates_keys:
        return False
    if head_dim & (head_dim - 1) and cfg.fp8_key_rotation is None:
        warnings.warn(f"fp8 keys stay unrotated: head_dim {head_dim} is not a power of two")
        return False
    hadamard(head_dim, torch.float32, "cpu")  # raises for a head_dim it cannot rotate
    return True
