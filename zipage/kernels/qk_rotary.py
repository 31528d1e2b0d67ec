"""Query/key preparation of one attention layer in one kernel: optional per-head RMS norm
(Qwen3's q_norm / k_norm), rotate-half (NeoX) RoPE and, for an FP8 cache, the orthonormal
Hadamard rotation of q and k (zipage/layers/key_rotation.py), read from the fused qkv
projection.

Unfused, a decode step ran four kernels per layer here (two norms, two rotaries; 31 us at
256 rows on an H200, 1.1 ms a step over 36 layers) for 2.5 MB of data. Rounding follows the
eager ops (zipage.layers.pointwise): the norm in float32, rounded to the activation dtype,
times the weight (rounded), then the rotation in float32, rounded once. The Hadamard
rotation, fused (it was two matmuls per layer: on an H100 at 512 rows this kernel takes
8.3 us with it, 3.7 without, the matmuls 7.3; docs/fp8.md), takes the rounded RoPE output:
with H_D = [[S, S], [S, -S]] / sqrt(D), S the +-1 Sylvester matrix of D/2,
x H_D = [x1 S + x2 S, x1 S - x2 S] / sqrt(D): two tf32 MMAs (bf16 and f16 values and +-1
are exact in tf32; float32 activations: IEEE float32) accumulated in float32, rounded once.
"""
import torch

from zipage.kernels._dispatch import cdiv, next_pow2, tl, triton, use_triton

_HEADS_PER_PROGRAM = 8  # without the rotation: a program per (token, 8 heads)
_ROWS_PER_ROTATING_PROGRAM = 32  # with it: 32 (token, head) rows, which share the signs


@triton.jit
def sylvester_signs(HALF: tl.constexpr):
    """(HALF, HALF) Sylvester-Hadamard matrix of +-1 (HALF a power of two <= 2**16): entry
    (i, j) is -1 where i & j has an odd number of set bits."""
    idx = tl.arange(0, HALF)
    bits = idx[:, None] & idx[None, :]
    bits = bits ^ (bits >> 8)
    bits = bits ^ (bits >> 4)
    bits = bits ^ (bits >> 2)
    bits = bits ^ (bits >> 1)
    return 1.0 - 2.0 * (bits & 1).to(tl.float32)


@triton.jit
def hadamard_halves(y1, y2, HALF: tl.constexpr, DOT_PREC: tl.constexpr):
    """[y1 | y2] (rows, 2 HALF) times the orthonormal Hadamard matrix, as float32 halves."""
    signs = sylvester_signs(HALF)
    r1, r2 = y1.to(tl.float32), y2.to(tl.float32)
    if HALF >= 16:  # bf16 and f16 values are exact in tf32 (10 mantissa bits), as is +-1
        d1 = tl.dot(r1, signs, input_precision=DOT_PREC)
        d2 = tl.dot(r2, signs, input_precision=DOT_PREC)
    else:  # under tl.dot's smallest K: products summed in registers
        d1 = tl.sum(r1[:, :, None] * signs[None, :, :], 1)
        d2 = tl.sum(r2[:, :, None] * signs[None, :, :], 1)
    norm = 1.0 / tl.sqrt(2.0 * HALF)
    return (d1 + d2) * norm, (d1 - d2) * norm


@triton.jit
def _qk_rotary_kernel(qkv_ptr, cos_ptr, sin_ptr, q_weight_ptr, k_weight_ptr, q_ptr, k_ptr,
                      stride_qkv, stride_cs, num_q_heads, num_heads, num_rows, eps,
                      HALF: tl.constexpr, ROWS: tl.constexpr, HAS_NORM: tl.constexpr,
                      ROTATE: tl.constexpr, DOT_PREC: tl.constexpr):
    cols = tl.arange(0, HALF)
    if ROTATE:  # ROWS consecutive (token, head) rows: the MMA wants many
        rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
        heads = rows % num_heads
        t = (rows // num_heads)[:, None]
        ok = (rows < num_rows)[:, None]
        tables = t * stride_cs + cols[None, :]
        c = tl.load(cos_ptr + tables, mask=ok, other=0.0)
        s = tl.load(sin_ptr + tables, mask=ok, other=0.0)
    else:  # one token, ROWS of its heads: its RoPE row loaded once
        t = tl.program_id(0).to(tl.int64)
        heads = tl.program_id(1) * ROWS + tl.arange(0, ROWS)
        ok = (heads < num_heads)[:, None]
        c = tl.load(cos_ptr + t * stride_cs + cols)[None, :]
        s = tl.load(sin_ptr + t * stride_cs + cols)[None, :]
    base = qkv_ptr + t * stride_qkv + heads[:, None] * (2 * HALF) + cols[None, :]
    x1 = tl.load(base, mask=ok, other=0.0)
    x2 = tl.load(base + HALF, mask=ok, other=0.0)
    dtype = x1.dtype
    is_q = (heads < num_q_heads)[:, None]
    if HAS_NORM:
        a, b = x1.to(tl.float32), x2.to(tl.float32)
        inv = tl.rsqrt((tl.sum(a * a, 1) + tl.sum(b * b, 1)) / (2 * HALF) + eps)
        w1 = tl.where(is_q, tl.load(q_weight_ptr + cols)[None, :],
                      tl.load(k_weight_ptr + cols)[None, :]).to(tl.float32)
        w2 = tl.where(is_q, tl.load(q_weight_ptr + HALF + cols)[None, :],
                      tl.load(k_weight_ptr + HALF + cols)[None, :]).to(tl.float32)
        x1 = ((a * inv[:, None]).to(dtype).to(tl.float32) * w1).to(dtype)
        x2 = ((b * inv[:, None]).to(dtype).to(tl.float32) * w2).to(dtype)
    a, b = x1.to(tl.float32), x2.to(tl.float32)
    y1, y2 = (a * c - b * s).to(dtype), (b * c + a * s).to(dtype)
    if ROTATE:
        y1, y2 = hadamard_halves(y1, y2, HALF, DOT_PREC)
        y1, y2 = y1.to(dtype), y2.to(dtype)
    q_off = (t * num_q_heads + heads[:, None]) * (2 * HALF) + cols[None, :]
    k_off = (t * (num_heads - num_q_heads) + heads[:, None] - num_q_heads) * (2 * HALF) \
        + cols[None, :]
    q_mask, k_mask = ok & is_q, ok & (heads >= num_q_heads)[:, None]
    tl.store(q_ptr + q_off, y1, mask=q_mask)
    tl.store(q_ptr + q_off + HALF, y2, mask=q_mask)
    tl.store(k_ptr + k_off, y1, mask=k_mask)
    tl.store(k_ptr + k_off + HALF, y2, mask=k_mask)


def qk_rotary(qkv: torch.Tensor, num_q_heads: int, num_kv_heads: int, head_dim: int,
              cos: torch.Tensor, sin: torch.Tensor, q_weight: torch.Tensor | None = None,
              k_weight: torch.Tensor | None = None, eps: float = 1e-6,
              rotate_keys: bool = False):
    """Rotated (and, with weights, RMS-normed) queries and keys of a fused projection.

    qkv (T, (Hq + 2*Hkv) * D), rows [q heads | k heads | v heads], unit inner stride;
    cos, sin (T, D/2) float32 (the RoPE tables gathered at the tokens' positions);
    q_weight, k_weight (D,) or both None (no QK norm); rotate_keys: q and k also times the
    orthonormal Hadamard matrix of D (key_rotation.hadamard) -> q (T, Hq, D), k (T, Hkv, D),
    new contiguous tensors of qkv's dtype. The values stay in qkv.
    """
    if not use_triton(qkv):
        return qk_rotary_reference(qkv, num_q_heads, num_kv_heads, head_dim, cos, sin,
                                   q_weight, k_weight, eps, rotate_keys)
    T = qkv.shape[0]
    assert qkv.stride(-1) == 1 and head_dim % 2 == 0 and next_pow2(head_dim) == head_dim, \
        "qk_rotary needs unit inner stride and a power-of-two head_dim"
    assert (q_weight is None) == (k_weight is None)
    assert cos.stride(-1) == 1 and sin.stride() == cos.stride()
    q = torch.empty(T, num_q_heads, head_dim, dtype=qkv.dtype, device=qkv.device)
    k = torch.empty(T, num_kv_heads, head_dim, dtype=qkv.dtype, device=qkv.device)
    if T == 0:
        return q, k
    heads = num_q_heads + num_kv_heads
    has_norm = q_weight is not None
    if rotate_keys:
        per_program = _ROWS_PER_ROTATING_PROGRAM
        grid = (cdiv(T * heads, per_program),)
    else:
        per_program = _HEADS_PER_PROGRAM
        grid = (T, cdiv(heads, per_program))
    _qk_rotary_kernel[grid](qkv, cos, sin, q_weight if has_norm else cos,
                            k_weight if has_norm else cos, q, k, qkv.stride(0), cos.stride(0),
                            num_q_heads, heads, T * heads, float(eps), HALF=head_dim // 2,
                            ROWS=per_program, HAS_NORM=has_norm, ROTATE=rotate_keys,
                            DOT_PREC="ieee" if qkv.dtype == torch.float32 else "tf32")
    return q, k


def qk_rotary_reference(qkv, num_q_heads, num_kv_heads, head_dim, cos, sin, q_weight=None,
                        k_weight=None, eps=1e-6, rotate_keys=False):
    """The eager ops the kernel fuses (zipage.layers.pointwise; the Hadamard rotation in
    float32 from the rounded RoPE output, rounded once), same arguments and result."""
    from zipage.layers.key_rotation import hadamard, rotate
    from zipage.layers.pointwise import rms_norm, rotary
    T = qkv.shape[0]
    q = qkv[:, :num_q_heads * head_dim].view(T, num_q_heads, head_dim)
    k = qkv[:, num_q_heads * head_dim:(num_q_heads + num_kv_heads) * head_dim]
    k = k.view(T, num_kv_heads, head_dim)
    if q_weight is not None:
        q, k = rms_norm(q, q_weight, eps), rms_norm(k, k_weight, eps)
    q, k = rotary(q, cos, sin), rotary(k, cos, sin)
    if rotate_keys:
        h = hadamard(head_dim, torch.float32, qkv.device)
        q, k = (rotate(x.float(), h).to(qkv.dtype) for x in (q, k))
    return q, k
