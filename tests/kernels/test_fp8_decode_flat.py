"""The flat FP8 decode kernel (zipage/kernels/fp8_decode_flat.py, paged_decode_attention with
programs_per_sm) against the reference, Triton interpreter: items of every length (none,
one key, partial and whole tiles and blocks) spread over programs that hold one to several
of them, with and without splits; the same tolerance as the split kernel's FP8 tests."""
import pytest
import torch
from kernel_testlib import (BF16, F32, assert_fp8_close, decode_batch, fp8_cache,
                            poisoned_decode_outputs, v_transposed)

from zipage.kernels import paged_decode_attention, paged_decode_attention_reference
from zipage.kernels.fp8_decode_flat import flat_num_splits, flat_programs, flat_programs_per_sm

CTX = [0, 1, 15, 16, 17, 45, 70, 130]


def run_flat(ctx_lens, G, H_kv, D, bs, splits, tile_n, programs_per_sm, operand=F32,
             num_stages=2):
    q, k, v, table, ctx = decode_batch(ctx_lens, G, H_kv, D, bs)
    q = (3 * q).to(BF16)
    (kc, ks), (vc, vs) = fp8_cache(k), fp8_cache(v)
    vc = v_transposed(vc)
    out, scratch = poisoned_decode_outputs(len(ctx_lens), G * H_kv, D, BF16, splits)
    res = paged_decode_attention(q, kc, vc, table, ctx, D ** -0.5, num_splits=splits, out=out,
                                 scratch=scratch, tile_n=tile_n, k_scale=ks, v_scale=vs,
                                 fp8_operand=operand, num_stages=num_stages,
                                 programs_per_sm=programs_per_sm)
    assert res is out
    ref = paged_decode_attention_reference(q, kc, vc, table, ctx, D ** -0.5, k_scale=ks,
                                           v_scale=vs)
    assert_fp8_close(out, ref, operand, vc, vs)
    return out


@pytest.mark.parametrize("bs,G,H_kv,D,splits,tile_n,programs_per_sm", [
    (32, 4, 2, 64, 1, 32, 1),     # 16 items on 4 programs (the interpreter's 4 SMs)
    (32, 4, 2, 64, 3, 32, 2),     # splits: partials and the merge
    (16, 2, 2, 32, 8, 16, 3),     # more splits than tiles: items with no keys
    (64, 4, 1, 16, 2, 32, 1),     # two tiles per block, head dim 16
    (32, 1, 4, 32, None, 32, 2),  # default splits (flat_num_splits)
])
def test_decode_flat(triton_cpu, bs, G, H_kv, D, splits, tile_n, programs_per_sm):
    out = run_flat(CTX, G, H_kv, D, bs, splits, tile_n, programs_per_sm)
    assert torch.count_nonzero(out[0]) == 0  # context 0 -> zeros


def test_decode_flat_engine_shape(triton_cpu):
    """Block 256, group 4, D 128 (Qwen3-8B per KV head), f16 operands, 128-key tiles."""
    run_flat([0, 1, 255, 256, 300, 700], 4, 2, 128, 256, 1, 128, 2, operand=torch.float16)


def test_decode_flat_refuses_what_it_cannot_run(triton_cpu):
    q, k, v, table, ctx = decode_batch([5, 9], 2, 2, 32, 16)
    with pytest.raises(ValueError, match="fp8 cache with V"):  # a bf16 cache
        paged_decode_attention(q, k, v, table, ctx, 1.0, programs_per_sm=2)
    (kc, ks), (vc, vs) = fp8_cache(k), fp8_cache(v)
    with pytest.raises(ValueError, match="fp8 cache with V"):  # V in rows
        paged_decode_attention(q, kc, vc, table, ctx, 1.0, k_scale=ks, v_scale=vs,
                               programs_per_sm=2)
    with pytest.raises(ValueError, match="must divide the block size"):
        paged_decode_attention(q, kc, v_transposed(vc), table, ctx, 1.0, k_scale=ks,
                               v_scale=vs, tile_n=32, programs_per_sm=2)


def test_flat_splits_and_programs():
    # Qwen3-8B on 132 SMs x 3 programs: 512 x 2048 keys (16 tiles) -> 2 splits (10.5 items'
    # worth per program against 11 unsplit); 296 rows fill 6 even rounds -> 1; 64 rows of
    # 16,384 keys -> 3 (4 items of a third each against 2 whole ones)
    assert flat_num_splits(512, 8, 16, 396) == 2
    assert flat_num_splits(296, 8, 16, 396) == 1
    assert flat_num_splits(64, 8, 128, 396) == 3
    assert flat_num_splits(1, 8, 1, 396) == 1  # one tile: nothing to split
    assert flat_programs(4096, 132, 3) == 396
    assert flat_programs(10, 132, 3) == 10  # never more programs than items
    assert flat_programs(64 * 1000, 4, 1) == 1000  # at most ITEMS_PAD items each


def test_flat_programs_fit_the_shared_memory_of_the_sm():
    """The grid assumes its programs are resident at once: on sm_90 (228 KiB per SM) the
    default's 4 fit; on sm_89 (100 KiB) only 2, so the grid shrinks rather than run a second
    round of programs."""
    from zipage.kernels.fp8_launch import FP8_DECODE, FP8_DECODE_FLAT
    assert flat_programs_per_sm(FP8_DECODE, 128, 228 * 1024) == 4
    assert flat_programs_per_sm(FP8_DECODE, 128, 100 * 1024) == 2
    three_stages = FP8_DECODE_FLAT[0]
    assert three_stages.num_stages == 3 and flat_programs_per_sm(three_stages, 128,
                                                                 100 * 1024) == 1


def test_default_falls_back_to_the_split_kernel_where_flat_cannot_run(triton_cpu):
    """FP8_DECODE is the flat kernel; a cache it cannot read (block 16 < its 128-key tile,
    or V in rows) gets the split kernel, not an error, when nobody asked for programs_per_sm."""
    from zipage.kernels.fp8_launch import FP8_DECODE
    assert FP8_DECODE.programs_per_sm == 4 and FP8_DECODE.tile_n == 128
    q, k, v, table, ctx = decode_batch(CTX, 2, 2, 32, 16)
    (kc, ks), (vc, vs) = fp8_cache(k), fp8_cache(v)
    ref = paged_decode_attention_reference(q, kc, vc, table, ctx, 0.2, k_scale=ks, v_scale=vs)
    for v_cache in (v_transposed(vc), vc):
        out = paged_decode_attention(q, kc, v_cache, table, ctx, 0.2, k_scale=ks, v_scale=vs,
                                     fp8_operand=F32)
        assert_fp8_close(out, ref, F32, vc, vs)
