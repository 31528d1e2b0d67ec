"""Compiled QK-norm + RoPE and gated-activation kernels on CUDA against their references, at
the decode and prefill shapes of Qwen3-8B / Llama. Timings: `bench kernels`."""
import pytest
import torch

from tests.kernels.kernel_testlib import cuda_kernels  # noqa: F401
from zipage.kernels.qk_rotary import qk_rotary, qk_rotary_reference
from zipage.kernels.silu_mul import silu_mul, silu_mul_reference


def _tables(T, D):
    inv = 1.0 / (1e6 ** (torch.arange(0, D, 2, device="cuda").float() / D))
    return (torch.outer(torch.randint(0, 40960, (T,), device="cuda").float(), inv).cos(),
            torch.outer(torch.randint(0, 40960, (T,), device="cuda").float(), inv).sin())


@pytest.mark.parametrize("T,hq,hkv,D,norm", [(256, 32, 8, 128, True), (4096, 32, 8, 128, True),
                                             (192, 32, 8, 128, False), (7, 9, 3, 64, True)])
def test_qk_rotary_compiled_matches_reference(cuda_kernels, T, hq, hkv, D, norm):
    qkv = torch.randn(T, (hq + 2 * hkv) * D, device="cuda").to(torch.bfloat16) * 4
    cos, sin = _tables(T, D)
    w = [(torch.rand(D, device="cuda") + 0.5).to(torch.bfloat16) for _ in range(2)]
    weights = w if norm else (None, None)
    q, k = qk_rotary(qkv, hq, hkv, D, cos, sin, *weights, 1e-6)
    q_ref, k_ref = qk_rotary_reference(qkv, hq, hkv, D, cos, sin, *weights, 1e-6)
    # The same roundings in both, but the norm's sum order and rsqrt may move the normed value
    # one ulp (2**-6 at |x| ~ 3); the rotation can cancel to a small result, so the bound is
    # absolute: 2 ulps at the normed scale (1 of 16.7M elements was 2**-6 off at T 4096).
    torch.testing.assert_close(q, q_ref, rtol=2**-7, atol=2**-5)
    torch.testing.assert_close(k, k_ref, rtol=2**-7, atol=2**-5)
    assert (q == q_ref).float().mean().item() > 0.95


@pytest.mark.parametrize("T,width", [(256, 12288), (4096, 12288), (3, 8192), (5, 1000)])
def test_silu_mul_compiled_matches_reference(cuda_kernels, T, width):
    gate_up = (torch.randn(T, 2 * width, device="cuda") * 4).to(torch.bfloat16)
    out = silu_mul(gate_up)
    ref = silu_mul_reference(gate_up)
    torch.testing.assert_close(out, ref, rtol=2**-7, atol=2**-7)
    assert (out == ref).float().mean().item() > 0.95


@pytest.mark.parametrize("T,hq,hkv,D", [(512, 32, 8, 128), (4096, 32, 8, 128), (7, 9, 3, 64),
                                        (5, 4, 2, 16)])
def test_qk_rotary_with_the_key_rotation_compiled_matches_reference(cuda_kernels, T, hq, hkv,
                                                                     D):
    """The engine's FP8 path (fp8_key_rotation): the Hadamard rotation fused as two tf32
    MMAs on the rounded RoPE output (exact products), against float32 matmuls."""
    qkv = torch.randn(T, (hq + 2 * hkv) * D, device="cuda").to(torch.bfloat16) * 4
    cos, sin = _tables(T, D)
    w = [(torch.rand(D, device="cuda") + 0.5).to(torch.bfloat16) for _ in range(2)]
    q, k = qk_rotary(qkv, hq, hkv, D, cos, sin, *w, 1e-6, rotate_keys=True)
    q_ref, k_ref = qk_rotary_reference(qkv, hq, hkv, D, cos, sin, *w, 1e-6, rotate_keys=True)
    # both sum D exact products in float32 (in other orders) and round once; the inputs may
    # differ by the unrotated kernel's ulp (above), spread over D outputs by the rotation
    torch.testing.assert_close(q, q_ref, rtol=2**-7, atol=2**-4)
    torch.testing.assert_close(k, k_ref, rtol=2**-7, atol=2**-4)
    assert (q == q_ref).float().mean().item() > 0.8
