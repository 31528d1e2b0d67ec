import pytest
import torch
from kernel_testlib import decode_batch, make_paged, naive_attention

from zipage.kernels import paged_decode_attention, paged_decode_attention_reference
from zipage.kernels.paged_decode import decode_scratch, default_num_splits

# ragged lengths: empty (padded batch row), single key, partial / exact / multi blocks
CTX = [0, 1, 15, 16, 17, 45, 70]


@pytest.mark.parametrize("bs,G,H_kv,D,splits,tile_n,dtype", [
    (16, 1, 2, 64, 1, 16, torch.float32),
    (16, 2, 2, 64, 3, 16, torch.float32),
    (32, 4, 1, 64, 4, 32, torch.float32),
    (16, 4, 2, 80, 2, 64, torch.float32),   # head dim padded to 128, tiles span 4 blocks
    (32, 2, 2, 80, 8, 16, torch.float32),   # more splits than tiles: empty splits
    (16, 1, 1, 64, None, None, torch.float32),  # default split count / tile
    (16, 3, 3, 64, 2, 16, torch.float32),   # non-power-of-two group (SmolLM2: 9 q / 3 kv)
    (16, 4, 2, 64, 2, 16, torch.bfloat16),
])
def test_decode_matches_reference(triton_cpu, bs, G, H_kv, D, splits, tile_n, dtype):
    H_q, B = G * H_kv, len(CTX)
    q, k_cache, v_cache, table, ctx = decode_batch(CTX, G, H_kv, D, bs, dtype)
    scale = D ** -0.5
    n_split = splits or default_num_splits(B, H_kv, table.shape[1] * bs, q.device)
    out = torch.full((B, H_q, D), float("nan"), dtype=dtype)  # poison: every row must be written
    scratch = tuple(t.fill_(float("nan")) for t in decode_scratch(B, H_q, D, n_split, q.device))
    res = paged_decode_attention(q, k_cache, v_cache, table, ctx, scale, num_splits=n_split,
                                 out=out, scratch=scratch, tile_n=tile_n)
    assert res is out
    ref = paged_decode_attention_reference(q, k_cache, v_cache, table, ctx, scale)
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else dict(rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out, ref, **tol)
    assert torch.count_nonzero(out[0]) == 0  # zero-length row -> zeros, not NaN


def test_decode_default_allocation(triton_cpu):
    """No out / scratch / num_splits given: wrapper allocates; non-power-of-two block size."""
    ctx_list = [5, 48, 30]
    k_cache, v_cache, table, _ = make_paged(ctx_list, 2, 64, 24)
    q = torch.randn(3, 4, 64)
    ctx = torch.tensor(ctx_list, dtype=torch.int32)
    out = paged_decode_attention(q, k_cache, v_cache, table, ctx, 0.1)
    ref = paged_decode_attention_reference(q, k_cache, v_cache, table, ctx, 0.1)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("G", [1, 4])
def test_decode_reference_matches_naive(G):
    """The reference itself against dense softmax attention on the unpaged K/V."""
    H_kv, D, bs = 2, 32, 16
    k_cache, v_cache, table, dense = make_paged(CTX, H_kv, D, bs)
    q = torch.randn(len(CTX), G * H_kv, D)
    ctx = torch.tensor(CTX, dtype=torch.int32)
    ref = paged_decode_attention_reference(q, k_cache, v_cache, table, ctx, 0.2)
    for b, (k, v) in enumerate(dense):
        if CTX[b] == 0:
            assert torch.count_nonzero(ref[b]) == 0
            continue
        exp = naive_attention(q[b:b + 1], k, v, 0.2, offset=CTX[b] - 1)[0]
        torch.testing.assert_close(ref[b].double(), exp, rtol=1e-5, atol=1e-6)
