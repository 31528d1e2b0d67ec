"""FP8 paged decode and prefill (zipage/kernels/fp8_tiles.py: e4m3 tiles as dot operands, the
scales on score columns and folded into V, or into P on the former path) against their
references, Triton interpreter.

Tolerance (kernel_testlib.assert_fp8_close, derived rather than tuned): the reference is
fp32 attention on the dequantised cache, fed q rounded to the kernel's operand type (the one
rounding of q the kernel makes). What remains is P and V * w rounded to the operand (on the
former path P * w once), relative u each (2^-24 fp32, 2^-11 f16, 2^-8 bf16), which moves an
output, a convex combination of V rows, by at most 2u * max|v|. Forgetting a scale or the V
weight fails by orders of magnitude.
"""
import pytest
import torch
from kernel_testlib import (BF16, F16, F32, assert_fp8_close, decode_batch, fp8_cache,
                            poisoned_decode_outputs, prefill_batch, quantize_paged,
                            v_transposed)

from zipage.kernels import (paged_decode_attention, paged_decode_attention_reference,
                            paged_prefill_attention, paged_prefill_attention_reference)
from zipage.kernels.fp8 import dequantize_reference
from zipage.kernels.fp8_launch import FP8_DECODE_OCCUPANCY

# ragged: empty (padded batch row), one key, partial / exact / several blocks
CTX = [0, 1, 15, 16, 17, 45, 70, 130]
PREFIX = [(13, 40), (1, 33), (16, 16), (0, 5), (18, 50), (20, 70)]  # (new tokens, context)


def operand_of(fp8_operand, q_dtype):
    """The operand type the wrappers pick (fp8_launch.resolve_launch)."""
    return fp8_operand or (F32 if q_dtype == F32 else F16)


@pytest.mark.parametrize("bs,G,H_kv,D,splits,tile_n,q_dtype,fp8_operand", [
    (16, 2, 2, 64, 3, 16, F32, None),     # fp32 queries: fp32 operands
    (16, 4, 2, 64, 1, 16, BF16, None),    # one split (normalised in place), f16 default
    (32, 3, 1, 80, 2, 32, F32, F16),      # head dim padded, group of 3
    (16, 1, 2, 64, 8, 16, F32, BF16),     # more splits than tiles: empty splits
    (16, 4, 2, 128, 2, 64, BF16, BF16),   # tiles span blocks: a table entry per key
    (64, 8, 1, 64, 4, 32, F32, F16),      # group of 8, two tiles per block
    (16, 2, 2, 64, None, None, BF16, None),  # default splits and tile (128 keys)
])
@pytest.mark.parametrize("v_layout", ["rows", "transposed"])  # transposed: the engine's
def test_decode_fp8(triton_cpu, bs, G, H_kv, D, splits, tile_n, q_dtype, fp8_operand,
                    v_layout):
    q, k, v, table, ctx = decode_batch(CTX, G, H_kv, D, bs)
    q = (3 * q).to(q_dtype)
    (kc, ks), (vc, vs) = fp8_cache(k), fp8_cache(v)
    if v_layout == "transposed":
        vc = v_transposed(vc)
    out, scratch = poisoned_decode_outputs(len(CTX), G * H_kv, D, q_dtype, splits)
    res = paged_decode_attention(q, kc, vc, table, ctx, D ** -0.5, num_splits=splits,
                                 out=out, scratch=scratch, tile_n=tile_n, k_scale=ks,
                                 v_scale=vs, fp8_operand=fp8_operand)
    assert res is out
    operand = operand_of(fp8_operand, q_dtype)
    ref = paged_decode_attention_reference(q.to(operand).to(q_dtype), kc, vc, table, ctx,
                                           D ** -0.5, k_scale=ks, v_scale=vs)
    assert_fp8_close(out, ref, operand, vc, vs)
    assert torch.count_nonzero(out[0]) == 0  # context 0 -> zeros


# V in rows made in registers or read as bytes, or V stored transposed (the engine's)
@pytest.mark.parametrize("v_path", ["registers", "bytes", "transposed"])
@pytest.mark.parametrize("bs,G,H_kv,D,tile_m,tile_n,q_dtype,fp8_operand", [
    (16, 2, 2, 64, 16, 16, F32, None),
    (16, 4, 2, 64, 16, 16, BF16, None),   # f16 default
    (32, 3, 1, 80, 32, 16, F32, F16),     # head dim padded, group of 3, two tiles a block
    (16, 1, 2, 64, 16, 32, F32, BF16),    # tiles span blocks: a table entry per key
    (64, 8, 1, 128, 32, 64, BF16, BF16),  # group of 8: 4 query tokens per tile
    (64, 4, 2, 128, None, None, BF16, None),  # default launch (compiled: FP8_PREFILL)
])
def test_prefill_fp8(triton_cpu, bs, G, H_kv, D, tile_m, tile_n, q_dtype, fp8_operand,
                     v_path):
    q, k, v, table, cu, ctx, _ = prefill_batch(PREFIX, G, H_kv, D, bs)
    q = (3 * q).to(q_dtype)
    (kc, ks), (vc, vs) = fp8_cache(k), fp8_cache(v)
    v_in_registers = {"registers": True, "bytes": False, "transposed": None}[v_path]
    if v_path == "transposed":
        vc = v_transposed(vc)
    args = (table, cu, ctx, max(n for n, _ in PREFIX), D ** -0.5)
    out = torch.full_like(q, float("nan"))
    paged_prefill_attention(q, kc, vc, *args, out=out, tile_m=tile_m, tile_n=tile_n,
                            k_scale=ks, v_scale=vs, fp8_operand=fp8_operand,
                            fp8_v_in_registers=v_in_registers)
    operand = operand_of(fp8_operand, q_dtype)
    ref = paged_prefill_attention_reference(q.to(operand).to(q_dtype), kc, vc, *args,
                                            k_scale=ks, v_scale=vs)
    assert_fp8_close(out, ref, operand, vc, vs)


# (operand, tile_n, num_warps, num_stages, num_splits, V path): every value of each axis of the
# sweep's grid (scripts/throughput/fp8_kernels.py) at least once, the default launch first, so
# tests/test_triton_compile.py compiles them for sm_90 at the Qwen3-8B constants. V path:
# "transposed" (the engine's V cache), or V in rows made in "registers" or read as "bytes"
SWEEP_COVER = [(F16, 128, 4, 3, 1, "transposed"), (F16, 128, 4, 3, 8, "transposed"),
               (BF16, 64, 8, 2, 2, "transposed"), (F16, 256, 4, 4, 4, "transposed"),
               (F16, 128, 4, 3, 2, "registers"), (BF16, 64, 8, 2, 4, "registers"),
               (F16, 256, 8, 4, 1, "registers"), (F16, 128, 4, 3, 1, "bytes"),
               (BF16, 64, 4, 3, 2, "bytes")]


@pytest.mark.parametrize("operand,tile_n,num_warps,num_stages,splits,v_path", SWEEP_COVER)
def test_decode_fp8_sweep_variants(triton_cpu, operand, tile_n, num_warps, num_stages, splits,
                                   v_path):
    """Block 256, group 4, D 128 (Qwen3-8B per KV head); the interpreter ignores warps and
    stages, the sm_90 compile run does not."""
    ctx_lens = [0, 1, 255, 256, 300, 700]
    q, k, v, table, ctx = decode_batch(ctx_lens, 4, 2, 128, 256)
    q = q.to(BF16)
    (kc, ks), (vc, vs) = fp8_cache(k), fp8_cache(v)
    v_in_registers = {"registers": True, "bytes": False, "transposed": None}[v_path]
    if v_path == "transposed":
        vc = v_transposed(vc)
    out = paged_decode_attention(q, kc, vc, table, ctx, 128 ** -0.5, num_splits=splits,
                                 tile_n=tile_n, num_warps=num_warps, num_stages=num_stages,
                                 k_scale=ks, v_scale=vs, fp8_operand=operand,
                                 fp8_v_in_registers=v_in_registers)
    ref = paged_decode_attention_reference(q, kc, vc, table, ctx, 128 ** -0.5, k_scale=ks,
                                           v_scale=vs)
    assert_fp8_close(out, ref, operand, vc, vs)


@pytest.mark.parametrize("launch", FP8_DECODE_OCCUPANCY, ids=lambda l: f"{l.tile_n}-{l.num_warps}w-{l.maxnreg}")
def test_decode_fp8_occupancy_launches(triton_cpu, launch):
    """The sweep's launches with a register cap (more programs per SM) compute what the
    default computes; the sm_90 compile run compiles them with the cap (spills included)."""
    q, k, v, table, ctx = decode_batch([1, 255, 300, 700], 4, 2, 128, 256)
    q = q.to(BF16)
    (kc, ks), (vc, vs) = fp8_cache(k), fp8_cache(v)
    vc = v_transposed(vc)
    out = paged_decode_attention(q, kc, vc, table, ctx, 128 ** -0.5, num_splits=2,
                                 tile_n=launch.tile_n, num_warps=launch.num_warps,
                                 num_stages=launch.num_stages, maxnreg=launch.maxnreg,
                                 k_scale=ks, v_scale=vs)
    ref = paged_decode_attention_reference(q, kc, vc, table, ctx, 128 ** -0.5, k_scale=ks,
                                           v_scale=vs)
    assert_fp8_close(out, ref, F16, vc, vs)


def test_fp8_references_are_the_dequantised_cache(triton_cpu):
    """The FP8 references equal the full-precision references on the dequantised cache
    (FP8 is only a storage format) and stay near attention on the unquantised cache."""
    q, k, v, table, ctx = decode_batch(CTX, 2, 2, 64, 16)
    (kc, ks), (vc, vs) = quantize_paged(k), quantize_paged(v)
    ref = paged_decode_attention_reference(q, kc, vc, table, ctx, 0.125, k_scale=ks,
                                           v_scale=vs)
    deq = paged_decode_attention_reference(q, dequantize_reference(kc, ks),
                                           dequantize_reference(vc, vs), table, ctx, 0.125)
    torch.testing.assert_close(ref, deq, rtol=0, atol=0)
    full = paged_decode_attention_reference(q, k, v, table, ctx, 0.125)
    assert 0 < (ref - full).abs().max() < 0.1
    q, k, v, table, cu, ctx, _ = prefill_batch(PREFIX, 2, 2, 64, 16)
    (kc, ks), (vc, vs) = quantize_paged(k), quantize_paged(v)
    args = (table, cu, ctx, 20, 0.125)
    torch.testing.assert_close(
        paged_prefill_attention_reference(q, kc, vc, *args, k_scale=ks, v_scale=vs),
        paged_prefill_attention_reference(q, dequantize_reference(kc, ks),
                                          dequantize_reference(vc, vs), *args),
        rtol=0, atol=0)


def test_fp8_options_are_checked(triton_cpu):
    q, k, v, table, ctx = decode_batch([5, 9], 2, 2, 64, 16)
    (kc, ks), (vc, vs) = quantize_paged(k), quantize_paged(v)
    with pytest.raises(ValueError, match="fp8_operand must be one of"):
        paged_decode_attention(q, kc, vc, table, ctx, 0.1, k_scale=ks, v_scale=vs,
                               fp8_operand=torch.int8)
    with pytest.raises(ValueError, match="fp8_operand: for an fp8 cache"):
        paged_decode_attention(q, k, v, table, ctx, 0.1, fp8_operand=F16)
    with pytest.raises(ValueError, match="fp8_v_in_registers: for an fp8 cache"):
        paged_decode_attention(q, k, v, table, ctx, 0.1, fp8_v_in_registers=True)
    q, k, v, table, cu, ctx_p, _ = prefill_batch(PREFIX, 2, 2, 64, 16)
    with pytest.raises(ValueError, match="fp8_v_in_registers: for an fp8 cache"):
        paged_prefill_attention(q, k, v, table, cu, ctx_p, 20, 0.125, fp8_v_in_registers=False)
    # the V path of a cache in rows means nothing for V stored transposed: refused, not ignored
    (kc, ks), (vc, vs) = quantize_paged(k), quantize_paged(v)
    with pytest.raises(ValueError, match="for a V cache in rows; this one is transposed"):
        paged_prefill_attention(q, kc, v_transposed(vc), table, cu, ctx_p, 20, 0.125,
                                k_scale=ks, v_scale=vs, fp8_v_in_registers=True)
