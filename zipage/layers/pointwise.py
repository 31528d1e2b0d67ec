"""Small pointwise ops of the decoder (norms, rotary).

On the GPU the residual norms are compiled with torch.compile (Inductor fuses each into one
Triton kernel: eager PyTorch runs 5-10 kernels per op, which dominated decode steps). On the
CPU the eager versions run, so CPU results stay bit-identical to Hugging Face transformers.
Set ZIPAGE_NO_COMPILE=1 to use the eager versions everywhere. The QK norm with RoPE and the
gated activation have hand-written kernels (zipage.kernels.qk_rotary, .silu_mul) whose
references are these eager ops.
"""
import os

import torch


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    dtype = x.dtype
    x = x.float()
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x.to(dtype)


def add_rms_norm(x, residual, weight, eps):
    """(norm(x + residual), x + residual): the residual stream update fused with the norm."""
    residual = x + residual
    return rms_norm(residual, weight, eps), residual


def rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (T, H, D) rotate-half (NeoX) layout; cos/sin (T, D/2) float32."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    x1, x2 = x.float().chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)


_COMPILED: dict = {}
_ENABLED = os.environ.get("ZIPAGE_NO_COMPILE", "0") != "1"


def op(fn, x: torch.Tensor):
    """The version of ``fn`` to use for tensors like ``x``."""
    if not (_ENABLED and x.is_cuda):
        return fn
    if fn not in _COMPILED:
        _COMPILED[fn] = torch.compile(fn, dynamic=True)
    return _COMPILED[fn]
