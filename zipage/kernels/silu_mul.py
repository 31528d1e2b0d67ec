"""The gated MLP activation silu(gate) * up, read from the fused gate_up projection.

Inductor's kernel for it (dynamic shapes) took 28 us at 256 rows x 12288 on an H200, 0.7 TB/s
(1.0 ms a decode step over 36 layers); this one is a plain streaming kernel. Rounding follows
the eager op: silu in float32 rounded to the activation dtype, times up, rounded.
"""
import torch
import torch.nn.functional as F

from zipage.kernels._dispatch import cdiv, tl, triton, use_triton

_BLOCK = 1024


@triton.jit
def _silu_mul_kernel(gate_up_ptr, out_ptr, stride_in, stride_out, width, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < width
    g = tl.load(gate_up_ptr + row * stride_in + cols, mask=mask, other=0.0)
    u = tl.load(gate_up_ptr + row * stride_in + width + cols, mask=mask, other=0.0)
    gf = g.to(tl.float32)
    act = (gf / (1.0 + tl.exp(-gf))).to(g.dtype)
    tl.store(out_ptr + row * stride_out + cols,
             (act.to(tl.float32) * u.to(tl.float32)).to(g.dtype), mask=mask)


def silu_mul(gate_up: torch.Tensor) -> torch.Tensor:
    """gate_up (T, 2*I) = [gate | up] with unit inner stride -> silu(gate) * up (T, I)."""
    if not use_triton(gate_up):
        return silu_mul_reference(gate_up)
    T, width = gate_up.shape[0], gate_up.shape[1] // 2
    assert gate_up.stride(-1) == 1 and gate_up.shape[1] == 2 * width
    out = torch.empty(T, width, dtype=gate_up.dtype, device=gate_up.device)
    if T:
        _silu_mul_kernel[(T, cdiv(width, _BLOCK))](gate_up, out, gate_up.stride(0),
                                                   out.stride(0), width, BLOCK=_BLOCK)
    return out


def silu_mul_reference(gate_up: torch.Tensor) -> torch.Tensor:
    gate, up = gate_up.chunk(2, dim=-1)
    return F.silu(gate) * up
