"""Compression on an FP8 KV cache (zipage/kernels/fp8.py): attention score and redundancy read
FP8 keys, compaction moves values with their scales; Triton (interpreter) vs references."""
from dataclasses import replace

import pytest
import torch
from compression_scene import MIXED, expected_compaction, make_scene, random_keep

from zipage.compression import REFERENCE_OPS, TRITON_OPS, CompressionConfig, compress_batch
from zipage.kernels.attention_score import attention_score, attention_score_reference
from zipage.kernels.compact_kv import compact, compact_reference
from zipage.kernels.fp8 import (FP8_DTYPE, copy_to_transposed_v, dequantize_reference,
                               quantize_reference)
from zipage.kernels.key_redundancy import redundancy, redundancy_reference


def _fp8_scene(q_dtype=torch.float32, **kw):
    """A compression scene with K/V quantised (poisoned NaN rows stay NaN)."""
    sc = make_scene(MIXED, **kw)
    sc.k += 0.5  # a shared direction: redundancy has similar pairs
    (k8, ks), (v8, vs) = quantize_reference(sc.k), quantize_reference(sc.v)
    return replace(sc, q=sc.q.to(q_dtype)), k8, ks, v8, vs


@pytest.mark.parametrize("q_dtype,fp8_operand,tile_n,scene", [
    (torch.float32, None, None, {}),  # fp32 operands
    (torch.bfloat16, None, None, {}),  # f16 operands (the default), tile of 32 over 2 blocks
    (torch.bfloat16, None, 64, {}),  # the former default tile: 64 over 4 blocks
    (torch.bfloat16, torch.bfloat16, 16, dict(D=64, G=4)),  # a tile per block, group of 4
    (torch.float16, torch.float16, 32, dict(D=80, G=3)),  # head dim padded, group of 3
])
def test_attention_score_fp8(triton_cpu, q_dtype, fp8_operand, tile_n, scene):
    """Half-precision window queries are exact in either operand type and the e4m3 keys
    too, so the kernel computes in fp32 what the reference does: fp32 tolerances."""
    sc, k8, ks, _, _ = _fp8_scene(q_dtype, **scene)
    bt = sc.batch
    args = (sc.q, bt.slots, bt.block_tables, bt.phys_lens, bt.window_pos)
    out = attention_score(k8, *args, k_scale=ks, tile_n=tile_n, fp8_operand=fp8_operand)
    ref = attention_score_reference(k8, *args, k_scale=ks)
    deq = attention_score_reference(dequantize_reference(k8, ks), *args)
    torch.testing.assert_close(ref, deq, rtol=0, atol=0)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("lightning,unit_dtype", [(True, torch.float32), (False, torch.bfloat16)])
def test_redundancy_fp8(triton_cpu, lightning, unit_dtype):
    sc, k8, ks, _, _ = _fp8_scene()
    bt = sc.batch
    args = (bt.block_tables, bt.phys_lens, lightning, 0.5)
    out = redundancy(k8, *args, unit_dtype=unit_dtype)
    ref = redundancy_reference(k8, *args, unit_dtype=unit_dtype)
    tol = dict(rtol=1e-4, atol=1e-4) if unit_dtype == torch.bfloat16 else {}
    torch.testing.assert_close(out, ref, **tol)
    # scales cancel in unit keys: the sums of the dequantised fp32 keys (up to rounding)
    fp32 = redundancy_reference(k8, *args, unit_dtype=torch.float32)
    deq = redundancy_reference(dequantize_reference(k8, ks), *args)
    torch.testing.assert_close(fp32, deq, rtol=1e-5, atol=1e-5)


def _bits(t):
    return t.view(torch.uint8) if t.dtype == FP8_DTYPE else t


@pytest.mark.parametrize("v_layout", ["rows", "transposed"])  # transposed: the engine's V
@pytest.mark.parametrize("fn", [compact, compact_reference])
def test_compact_moves_scales(triton_cpu, fn, v_layout):
    sc, k8, ks, v8, vs = _fp8_scene()
    if v_layout == "transposed":
        v8 = copy_to_transposed_v(v8)
    keep, S = random_keep(sc)
    bt = sc.batch
    got = [t.clone() for t in (k8, v8, ks, vs)] + [sc.sc.clone()]
    fn(got[0], got[1], keep, bt.block_tables, bt.target_tables, bt.phys_lens, S, got[4],
       k_scale=got[2], v_scale=got[3])
    # expected: the same moves on the dequantised caches and on the scales (as D = 1 rows)
    k_exp, v_exp, cache_exp = expected_compaction(
        replace(sc, k=dequantize_reference(k8, ks),
                v=dequantize_reference(v8, vs).contiguous()), keep, S)
    ks_exp, vs_exp, _ = expected_compaction(replace(sc, k=ks[..., None], v=vs[..., None]),
                                            keep, S)
    for g, w in ((got[2], ks_exp[..., 0]), (got[3], vs_exp[..., 0]), (got[4], cache_exp),
                 (dequantize_reference(got[0], got[2]), k_exp),
                 (dequantize_reference(got[1], got[3]), v_exp)):
        torch.testing.assert_close(g, w, rtol=0, atol=0, equal_nan=True)


def test_pipeline_fp8_triton_matches_reference(triton_cpu):
    cfg = CompressionConfig.paper(observation_window=8, num_sink_tokens=2)
    sc, k8, ks, v8, vs = _fp8_scene(L=3)
    out = {}
    for name, ops in (("triton", TRITON_OPS), ("reference", REFERENCE_OPS)):
        got = [t.clone() for t in (k8, v8, ks, vs, sc.sc)]
        compress_batch(got[0], got[1], sc.q, got[4], sc.batch, cfg, 2, ops=ops,
                       k_scale=got[2], v_scale=got[3])
        out[name] = got
    kept_t = dequantize_reference(out["triton"][0], out["triton"][2])
    kept_r = dequantize_reference(out["reference"][0], out["reference"][2])
    same = (kept_t == kept_r) | (kept_t.isnan() & kept_r.isnan())
    assert same.float().mean() > 0.99  # the same tokens kept up to float near-ties
    # compaction did move tokens (the cache changed)
    assert not torch.equal(_bits(out["reference"][0]), _bits(k8))
