"""FP8 paged decode with e4m3 MMAs (zipage/kernels/fp8_decode_mma.py, fp8_operand
torch.float8_e4m3fn) against the reference, Triton interpreter.

Tolerance (kernel_testlib.assert_fp8_close with u = 2^-8): q and P reach the MMA as two
e4m3 terms, 8 significant bits, so a bf16 q is exact and P * w is rounded like a bf16
operand; the reference gets q rounded to bf16. Forgetting the lo term (u = 2^-4), a scale,
the V weight or the spare column's v_max fails by far more.
"""
import pytest
import torch
from kernel_testlib import (BF16, F32, assert_fp8_close, decode_batch, fp8_cache,
                            poisoned_decode_outputs, quantize_paged, v_transposed)

from zipage.kernels import paged_decode_attention, paged_decode_attention_reference
from zipage.kernels.fp8 import FP8_DTYPE

CTX = [0, 1, 15, 16, 17, 45, 70, 130]  # empty, one key, partial / exact / several blocks


def run_e4m3(ctx_lens, G, H_kv, D, bs, q_dtype, splits=None, tile_n=None, v_gain=1.0,
             **launch):
    q, k, v, table, ctx = decode_batch(ctx_lens, G, H_kv, D, bs)
    q = (3 * q).to(q_dtype)
    (kc, ks), (vc, vs) = fp8_cache(k), fp8_cache(v * v_gain)
    vc = v_transposed(vc)
    out, scratch = poisoned_decode_outputs(len(ctx_lens), G * H_kv, D, q_dtype, splits)
    res = paged_decode_attention(q, kc, vc, table, ctx, D ** -0.5, num_splits=splits,
                                 out=out, scratch=scratch, tile_n=tile_n, k_scale=ks,
                                 v_scale=vs, fp8_operand=FP8_DTYPE, **launch)
    assert res is out
    ref = paged_decode_attention_reference(q.to(BF16).to(q_dtype), kc, vc, table, ctx,
                                           D ** -0.5, k_scale=ks, v_scale=vs)
    return out, ref, vc, vs


@pytest.mark.parametrize("bs,G,H_kv,D,splits,tile_n,q_dtype", [
    (32, 4, 2, 64, 1, 32, BF16),    # one split: normalised in place
    (32, 4, 2, 64, 3, 32, F32),     # fp32 queries: rounded to 8 bits like bf16
    (32, 3, 1, 80, 2, 32, BF16),    # head dim padded, group of 3
    (32, 1, 2, 64, 8, 32, BF16),    # more splits than tiles: empty splits
    (16, 4, 2, 128, 2, 64, BF16),   # tiles span blocks: a table entry per key
    (64, 8, 1, 64, 4, 32, BF16),    # group of 8, two tiles per block
    (32, 16, 1, 32, 2, 32, BF16),   # group of 16: padded to 32 for the spare column
    (16, 2, 2, 64, None, None, BF16),  # default splits and tile (E4M3_DECODE, 128 keys)
])
def test_decode_e4m3_mma(triton_cpu, bs, G, H_kv, D, splits, tile_n, q_dtype):
    out, ref, vc, vs = run_e4m3(CTX, G, H_kv, D, bs, q_dtype, splits, tile_n)
    assert_fp8_close(out, ref, FP8_DTYPE, vc, vs)
    assert torch.count_nonzero(out[0]) == 0  # context 0 -> zeros


@pytest.mark.parametrize("tile_n,num_warps,num_stages,splits", [
    (128, 4, 3, 1), (128, 4, 2, 2), (64, 4, 3, 4), (128, 8, 3, 8)])
def test_decode_e4m3_mma_engine_shape(triton_cpu, tile_n, num_warps, num_stages, splits):
    """Block 256, group 4, D 128 (Qwen3-8B per KV head) at the launches the GPU sweep times;
    the sm_90 compile run compiles each (tests/test_triton_compile.py)."""
    out, ref, vc, vs = run_e4m3([0, 1, 255, 256, 300, 700], 4, 2, 128, 256, BF16, splits,
                                tile_n, num_warps=num_warps, num_stages=num_stages)
    assert_fp8_close(out, ref, FP8_DTYPE, vc, vs)


@pytest.mark.parametrize("v_gain", [1e-7, 1e5])
def test_decode_e4m3_mma_v_far_from_one(triton_cpu, v_gain):
    """P * v_scale would leave e4m3's range (below 2^-9, above 448) for V this small or
    large: the tile's largest V scale is factored out first."""
    out, ref, vc, vs = run_e4m3(CTX, 4, 2, 64, 16, F32, 2, 32, v_gain=v_gain)
    assert_fp8_close(out, ref, FP8_DTYPE, vc, vs)


def test_decode_e4m3_mma_needs_v_transposed(triton_cpu):
    q, k, v, table, ctx = decode_batch([5, 9], 4, 2, 64, 16)
    (kc, ks), (vc, vs) = quantize_paged(k), quantize_paged(v)
    with pytest.raises(ValueError, match="needs the V cache stored transposed"):
        paged_decode_attention(q, kc, vc, table, ctx, 0.125, k_scale=ks, v_scale=vs,
                               fp8_operand=FP8_DTYPE)
    with pytest.raises(ValueError, match="fp8_operand: for an fp8 cache"):
        paged_decode_attention(q, k, v, table, ctx, 0.125, fp8_operand=FP8_DTYPE)
    with pytest.raises(ValueError, match="tile_n >= 32"):  # an e4m3 MMA's shortest contraction
        paged_decode_attention(q, kc, v_transposed(vc), table, ctx, 0.125, k_scale=ks,
                               v_scale=vs, fp8_operand=FP8_DTYPE, tile_n=16)


def test_e4m3_reference_rounds_like_the_kernel(triton_cpu):
    """paged_decode_e4m3_reference (the CPU path of fp8_decode='e4m3') rounds q and P as the
    kernel does: within the tolerance of both the kernel and the exact reference, and not
    equal to the exact one."""
    from zipage.kernels.fp8_decode_mma_reference import paged_decode_e4m3_reference
    q, k, v, table, ctx = decode_batch(CTX, 4, 2, 64, 16)
    q = 3 * q
    (kc, ks), (vc, vs) = fp8_cache(k), fp8_cache(v)
    args = (table, ctx, 0.125)
    exact = paged_decode_attention_reference(q, kc, vc, *args, k_scale=ks, v_scale=vs)
    rounded = paged_decode_e4m3_reference(q, kc, vc, *args, k_scale=ks, v_scale=vs)
    kernel = paged_decode_attention(q, kc, v_transposed(vc), *args, k_scale=ks, v_scale=vs,
                                    fp8_operand=FP8_DTYPE, tile_n=32)
    assert_fp8_close(rounded, exact, FP8_DTYPE, vc, vs)
    assert_fp8_close(kernel, rounded, FP8_DTYPE, vc, vs)
    assert (rounded - exact).abs().max() > 0
    assert torch.count_nonzero(rounded[0]) == 0  # context 0 -> zeros
