"""The decoder's fused pointwise kernels (QK norm + RoPE, gated activation) against their
eager references, in the Triton interpreter (compiled on the GPU: tests/gpu)."""
import pytest
import torch

from zipage.kernels.qk_rotary import qk_rotary, qk_rotary_reference
from zipage.kernels.silu_mul import silu_mul, silu_mul_reference


# bf16: both ops round twice (as the eager ops do); the interpreter's fp32 -> bf16 cast
# truncates where torch rounds, so up to 2 bf16 ulps apart. Compiled kernels: tests/gpu.
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.bfloat16: dict(rtol=2**-6, atol=2**-6)}


def rope_tables(T, D, max_pos=4096):
    inv = 1.0 / (10000 ** (torch.arange(0, D, 2).float() / D))
    pos = torch.randint(0, max_pos, (T,))
    freqs = torch.outer(pos.float(), inv)
    return freqs.cos(), freqs.sin()


@pytest.mark.parametrize("T,hq,hkv,D,norm,dtype", [
    (5, 4, 2, 64, True, torch.float32),
    (3, 6, 2, 32, False, torch.float32),     # no QK norm (Llama, Qwen2)
    (7, 3, 1, 128, True, torch.float32),     # head blocks straddle the q/k boundary
    (4, 16, 16, 16, True, torch.float32),    # q and k heads of 8-head programs only
    (6, 4, 2, 64, True, torch.bfloat16),
])
def test_qk_rotary_matches_reference(triton_cpu, T, hq, hkv, D, norm, dtype):
    qkv = (torch.randn(T, (hq + 2 * hkv) * D) * 3).to(dtype)
    cos, sin = rope_tables(T, D)
    w = (torch.rand(D) + 0.5).to(dtype), (torch.rand(D) + 0.5).to(dtype)
    weights = w if norm else (None, None)
    q, k = qk_rotary(qkv, hq, hkv, D, cos, sin, *weights, 1e-6)
    q_ref, k_ref = qk_rotary_reference(qkv, hq, hkv, D, cos, sin, *weights, 1e-6)
    assert q.shape == (T, hq, D) and k.shape == (T, hkv, D) and q.dtype == dtype
    torch.testing.assert_close(q, q_ref, **TOL[dtype])
    torch.testing.assert_close(k, k_ref, **TOL[dtype])


def test_qk_rotary_of_no_tokens_is_empty(triton_cpu):
    q, k = qk_rotary(torch.empty(0, 8 * 64), 4, 2, 64, *rope_tables(0, 64))
    assert q.shape == (0, 4, 64) and k.shape == (0, 2, 64)


def test_qk_rotary_reference_is_norm_then_rotation():
    """The reference against the textbook formulas: per-head RMS norm, then rotate-half RoPE."""
    T, hq, hkv, D = 3, 2, 1, 8
    qkv = torch.randn(T, (hq + 2 * hkv) * D, dtype=torch.float64)
    cos, sin = (x.double() for x in rope_tables(T, D))
    wq, wk = torch.rand(D, dtype=torch.float64), torch.rand(D, dtype=torch.float64)
    q, k = qk_rotary_reference(qkv, hq, hkv, D, cos, sin, wq, wk, 1e-6)
    x = qkv[:, :D]  # token t, query head 0
    n = x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6) * wq
    a, b = n[:, :D // 2], n[:, D // 2:]
    expected = torch.cat([a * cos - b * sin, b * cos + a * sin], -1)
    torch.testing.assert_close(q[:, 0], expected)
    assert torch.equal(qkv[:, (hq + hkv) * D:], qkv[:, (hq + hkv) * D:])  # v untouched


@pytest.mark.parametrize("T,width,dtype", [
    (4, 64, torch.float32), (3, 1500, torch.float32),  # several column programs, ragged tail
    (5, 2048, torch.bfloat16), (0, 64, torch.float32),
])
def test_silu_mul_matches_reference(triton_cpu, T, width, dtype):
    gate_up = (torch.randn(T, 2 * width) * 4).to(dtype)
    out = silu_mul(gate_up)
    assert out.shape == (T, width) and out.dtype == dtype
    torch.testing.assert_close(out, silu_mul_reference(gate_up), **TOL[dtype])


def test_silu_mul_reference_formula():
    g, u = torch.randn(3, 5, dtype=torch.float64), torch.randn(3, 5, dtype=torch.float64)
    torch.testing.assert_close(silu_mul_reference(torch.cat([g, u], 1)),
                               g / (1 + torch.exp(-g)) * u)


@pytest.mark.parametrize("T,hq,hkv,D,norm,dtype", [
    (5, 4, 2, 64, True, torch.float32),
    (3, 6, 2, 32, False, torch.float32),
    (7, 3, 1, 128, True, torch.float32),     # 32-row programs span tokens and q/k heads
    (4, 20, 4, 32, True, torch.float32),     # 96 rows: the last of 3 programs is all-valid
    (3, 7, 2, 32, True, torch.float32),      # 27 rows: one program, part-masked
    (3, 4, 2, 16, True, torch.float32),      # halves under tl.dot's K of 16: summed in registers
    (2, 2, 1, 2, False, torch.float32),
    (6, 4, 2, 64, True, torch.bfloat16),
])
def test_qk_rotary_with_the_key_rotation_matches_reference(triton_cpu, T, hq, hkv, D, norm,
                                                            dtype):
    qkv = (torch.randn(T, (hq + 2 * hkv) * D) * 3).to(dtype)
    cos, sin = rope_tables(T, D)
    w = (torch.rand(D) + 0.5).to(dtype), (torch.rand(D) + 0.5).to(dtype)
    weights = w if norm else (None, None)
    q, k = qk_rotary(qkv, hq, hkv, D, cos, sin, *weights, 1e-6, rotate_keys=True)
    q_ref, k_ref = qk_rotary_reference(qkv, hq, hkv, D, cos, sin, *weights, 1e-6,
                                       rotate_keys=True)
    assert q.shape == (T, hq, D) and k.shape == (T, hkv, D) and q.dtype == dtype
    # the rotation sums D rounded values: an ulp of the largest entry, not of the result
    tol = TOL[dtype] if dtype == torch.float32 else dict(rtol=2**-6, atol=2**-4)
    torch.testing.assert_close(q, q_ref, **tol)
    torch.testing.assert_close(k, k_ref, **tol)


def test_qk_rotary_reference_rotation_is_the_hadamard_of_the_unrotated_output():
    """rotate_keys is the orthonormal Hadamard matrix applied after norm and RoPE: every q.k
    of a head is unchanged (float64)."""
    from zipage.layers.key_rotation import hadamard
    T, hq, hkv, D = 3, 4, 2, 16
    qkv = torch.randn(T, (hq + 2 * hkv) * D, dtype=torch.float64)
    cos, sin = (x.double() for x in rope_tables(T, D))
    q, k = qk_rotary_reference(qkv, hq, hkv, D, cos, sin)
    q_rot, k_rot = qk_rotary_reference(qkv, hq, hkv, D, cos, sin, rotate_keys=True)
    h = hadamard(D, torch.float32, "cpu").double()
    torch.testing.assert_close(q_rot, q @ h, rtol=1e-6, atol=1e-6)  # h rounded to float32
    torch.testing.assert_close(q_rot @ k_rot[:, :1].transpose(1, 2),
                               q @ k[:, :1].transpose(1, 2), rtol=1e-5, atol=1e-5)
