"""FP8 KV cache (zipage/kernels/fp8.py): quantisation and the KV write (Triton in the
interpreter vs the PyTorch references). Attention on the FP8 cache: test_fp8_attention.py."""
import pytest
import torch
from kernel_testlib import quantize_paged, v_transposed

from zipage.kernels import store_kv, store_kv_reference
from zipage.kernels.fp8 import (FP8_DTYPE, dequantize_reference, is_v_transposed,
                               quantize_reference)


def test_quantize_reference_error_bound():
    x = torch.randn(64, 4, 128) * torch.rand(64, 4, 1) * 50
    x[0, 0] = 0.0  # an all-zero row: scale 0, values 0
    q, s = quantize_reference(x)
    assert q.dtype == FP8_DTYPE and s.shape == (64, 4)
    assert s[0, 0] == 0 and torch.count_nonzero(q[0, 0].float()) == 0
    back = dequantize_reference(q, s)
    # e4m3: 3 mantissa bits, half an ulp is 2**-4 relative; below 2**-6 (subnormal) the
    # absolute step is 2**-9 of the scale
    bound = torch.maximum(x.abs() * 2**-4, s[..., None] * 2**-10)
    assert bool(((back - x).abs() <= bound * 1.0001).all())
    assert torch.equal(q.float().abs().amax(-1)[1:], torch.full((63, 4), 448.0))


def _fp8_caches(NB, bs, H, D):
    k, v = torch.randn(NB, bs, H, D), torch.randn(NB, bs, H, D)
    return (*quantize_paged(k), *quantize_paged(v))


@pytest.mark.parametrize("v_layout", ["rows", "transposed"])  # transposed: the engine's V
@pytest.mark.parametrize("N,H,D,bs,NB", [(10, 2, 64, 16, 4), (7, 3, 80, 32, 2), (5, 8, 128, 16, 3)])
def test_store_kv_fp8_matches_reference(triton_cpu, N, H, D, bs, NB, v_layout):
    qkv = torch.randn(N, 3 * H * D) * 3
    qkv[0, 2 * H * D + 1] = float("nan")  # a NaN value row: scale NaN, no NaN byte stored
    key = qkv[:, H * D: 2 * H * D].view(N, H, D)
    value = qkv[:, 2 * H * D:].view(N, H, D)
    slots = torch.randperm(NB * bs)[:N].long()
    slots[torch.randperm(N)[:2]] = -1
    kc, ks, vc, vs = _fp8_caches(NB, bs, H, D)
    if v_layout == "transposed":
        vc = v_transposed(vc)
    ref = [t.clone() for t in (kc, ks, vc, vs)]
    assert is_v_transposed(ref[2]) == (v_layout == "transposed")
    store_kv(key, value, kc, vc, slots, ks, vs)
    store_kv_reference(key, value, ref[0], ref[2], slots, ref[1], ref[3])
    for got, want in zip((kc, ks, vc, vs), ref):  # bit-exact, untouched slots included
        if got.dtype == FP8_DTYPE:
            got, want = got.view(torch.uint8), want.view(torch.uint8)
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    written = slots[slots >= 0]
    q, s = quantize_reference(key[slots >= 0])
    assert torch.equal(kc.view(-1, H, D)[written].view(torch.uint8), q.view(torch.uint8))
    assert torch.equal(ks.view(-1, H)[written], s)
    assert not (kc.float().isnan().any() or vc.float().isnan().any())
    if slots[0] >= 0:
        assert vs.view(-1, H)[slots[0], 0].isnan()
        assert vc[slots[0] // bs, slots[0] % bs, 0].float().eq(0).all()  # +-0, no NaN
    q, s = quantize_reference(value[slots >= 0])  # V by (block, offset), whatever its layout
    got = vc[written // bs, written % bs]
    assert torch.equal(got.view(torch.uint8), q.view(torch.uint8))
    torch.testing.assert_close(vs.view(-1, H)[written], s, rtol=0, atol=0, equal_nan=True)


def test_fp8_cache_needs_scales():
    kc = torch.zeros(2, 16, 2, 64, dtype=FP8_DTYPE)
    x = torch.randn(1, 2, 64)
    with pytest.raises(ValueError, match="scale"):
        store_kv_reference(x, x, kc, kc, torch.tensor([3]))
