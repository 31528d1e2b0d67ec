import pytest
import torch
from kernel_testlib import make_paged, naive_attention, prefill_batch

from zipage.kernels import paged_prefill_attention, paged_prefill_attention_reference

# (q_len, context_len) per packed sequence
PLAIN = [(20, 20), (7, 7), (1, 1)]
PREFIX = [(13, 40), (1, 33), (16, 16), (0, 5), (18, 50)]  # prefix hits / chunks / decode row
MIXED = [(33, 70), (5, 5), (2, 31)]
# a prefix hit spanning a 256-token block, a plain prompt, a decode row, an empty row
LONG_PREFIX = [(37, 300), (21, 21), (1, 260), (0, 9)]


def _run(seqs, bs, G, H_kv, D, dtype, tile_m=None, tile_n=None, extra_q=0):
    q, k_cache, v_cache, table, cu, ctx, dense = prefill_batch(seqs, G, H_kv, D, bs, dtype)
    max_q_len = max(n for n, _ in seqs)
    out = torch.full_like(q, float("nan"))  # poison: every row must be written
    res = paged_prefill_attention(q, k_cache, v_cache, table, cu, ctx, max_q_len + extra_q,
                                  D ** -0.5, out=out, tile_m=tile_m, tile_n=tile_n)
    assert res is out
    ref = paged_prefill_attention_reference(q, k_cache, v_cache, table, cu, ctx, max_q_len,
                                            D ** -0.5)
    return out, ref


def _tol(dtype):
    return dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else dict(rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("seqs,bs,G,H_kv,D,bm,bn,dtype", [
    (PLAIN, 16, 1, 2, 64, 16, 16, torch.float32),
    (PREFIX, 16, 2, 2, 64, 16, 32, torch.float32),
    (PREFIX, 32, 4, 1, 64, 32, 16, torch.float32),
    (MIXED, 32, 2, 1, 80, 16, 16, torch.float32),   # head dim padded to 128
    (PREFIX, 16, 3, 1, 64, 16, 16, torch.float32),  # non-power-of-two group
    (MIXED, 16, 4, 2, 64, None, None, torch.bfloat16),
])
def test_prefill_matches_reference(triton_cpu, seqs, bs, G, H_kv, D, bm, bn, dtype):
    out, ref = _run(seqs, bs, G, H_kv, D, dtype, bm, bn)
    torch.testing.assert_close(out, ref, **_tol(dtype))


@pytest.mark.parametrize("seqs,bs,G,H_kv,D,tile_m,tile_n,dtype", [
    (PREFIX, 16, 1, 2, 128, 32, 16, torch.float32),
    (LONG_PREFIX, 256, 2, 2, 64, 16, 32, torch.float32),
    (PREFIX, 16, 4, 1, 128, 16, 16, torch.float32),   # a tile holds 4 query tokens
    (LONG_PREFIX, 256, 4, 2, 64, 64, 16, torch.float32),
    (PREFIX, 16, 8, 1, 64, 16, 16, torch.float32),    # 2 query tokens per tile
    (LONG_PREFIX, 256, 8, 1, 128, 32, 32, torch.float32),
    (PREFIX, 16, 8, 1, 64, None, None, torch.bfloat16),
])
def test_gqa_packed_tiles_match_reference(triton_cpu, seqs, bs, G, H_kv, D, tile_m, tile_n,
                                          dtype):
    """One program per (query tile, sequence, KV head) serves the G query heads of that KV
    head: tiles cut through query tokens and heads, q_len is no multiple of the tile, and
    causal masking starts mid-tile after prefixes of any length."""
    out, ref = _run(seqs, bs, G, H_kv, D, dtype, tile_m, tile_n)
    torch.testing.assert_close(out, ref, **_tol(dtype))


def test_prefill_oversized_grid(triton_cpu):
    """max_q_len larger than any sequence: the extra query tiles must write nothing."""
    out, ref = _run(MIXED, 16, 2, 1, 64, torch.float32, 16, 16, extra_q=40)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("seqs,G", [(PREFIX, 2), (PLAIN, 1)])
def test_prefill_reference_matches_naive(seqs, G):
    """The reference itself against dense causal attention on the unpaged K/V."""
    q_lens, ctx_list = zip(*seqs)
    k_cache, v_cache, table, dense = make_paged(ctx_list, 2, 32, 16)
    cu = [0]
    for n in q_lens:
        cu.append(cu[-1] + n)
    q = torch.randn(cu[-1], 2 * G, 32)
    ref = paged_prefill_attention_reference(
        q, k_cache, v_cache, table, torch.tensor(cu, dtype=torch.int32),
        torch.tensor(ctx_list, dtype=torch.int32), max(q_lens), 0.2)
    for s, (k, v) in enumerate(dense):
        lo, hi = cu[s], cu[s + 1]
        if hi == lo:
            continue
        exp = naive_attention(q[lo:hi], k, v, 0.2, offset=ctx_list[s] - (hi - lo))
        torch.testing.assert_close(ref[lo:hi].double(), exp, rtol=1e-5, atol=1e-6)
