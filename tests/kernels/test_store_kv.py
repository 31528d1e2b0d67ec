import pytest
import torch

from zipage.kernels import store_kv, store_kv_reference, store_rows, store_rows_reference


def _slots(n, total, n_skip):
    """n distinct random slots in [0, total), n_skip of them replaced by -1."""
    slots = torch.randperm(total)[:n]
    slots[torch.randperm(n)[:n_skip]] = -1
    return slots.long()


@pytest.mark.parametrize("N,H,D,bs,NB,cache_dtype", [
    (10, 2, 64, 16, 4, torch.float32),
    (7, 3, 80, 32, 2, torch.float32),      # H*D = 240: not a power of two
    (5, 8, 128, 16, 3, torch.float32),     # 1024-wide rows
    (4, 5, 512, 16, 2, torch.float32),     # 2560 > one row tile: several column programs
    (9, 2, 64, 16, 4, torch.bfloat16),     # fp32 input cast into a bf16 cache
])
def test_store_kv_matches_reference(triton_cpu, N, H, D, bs, NB, cache_dtype):
    # key/value as strided slices of a fused qkv projection (token stride != H*D)
    qkv = torch.randn(N, 3 * H * D)
    key = qkv[:, H * D: 2 * H * D].view(N, H, D)
    value = qkv[:, 2 * H * D:].view(N, H, D)
    slots = _slots(N, NB * bs, n_skip=2)
    k_cache = torch.randn(NB, bs, H, D).to(cache_dtype)
    v_cache = torch.randn(NB, bs, H, D).to(cache_dtype)
    k_ref, v_ref = k_cache.clone(), v_cache.clone()
    store_kv(key, value, k_cache, v_cache, slots)
    store_kv_reference(key, value, k_ref, v_ref, slots)
    # whole caches compared: written slots and untouched ones (incl. skipped rows).
    # Exact, except fp32 -> bf16 casts: the interpreter truncates where torch rounds (1 ulp)
    tol = dict(rtol=0, atol=0) if cache_dtype == torch.float32 else dict(rtol=2**-7, atol=0)
    torch.testing.assert_close(k_cache, k_ref, **tol)
    torch.testing.assert_close(v_cache, v_ref, **tol)


def test_store_kv_reference_semantics():
    """Reference checked against an explicit per-token loop."""
    N, H, D, bs, NB = 6, 2, 16, 4, 3
    key, value = torch.randn(N, H, D), torch.randn(N, H, D)
    slots = torch.tensor([5, -1, 0, 11, -1, 7])
    k_cache, v_cache = torch.zeros(NB, bs, H, D), torch.zeros(NB, bs, H, D)
    store_kv_reference(key, value, k_cache, v_cache, slots)
    k_exp, v_exp = torch.zeros(NB, bs, H, D), torch.zeros(NB, bs, H, D)
    for i, s in enumerate(slots.tolist()):
        if s >= 0:
            k_exp[s // bs, s % bs], v_exp[s // bs, s % bs] = key[i], value[i]
    assert torch.equal(k_cache, k_exp) and torch.equal(v_cache, v_exp)


def test_store_kv_empty(triton_cpu):
    k_cache = torch.zeros(2, 16, 2, 64)
    before = k_cache.clone()
    e = torch.empty(0, 2, 64)
    store_kv(e, e, k_cache, k_cache, torch.empty(0, dtype=torch.long))
    assert torch.equal(k_cache, before)


@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
def test_store_rows_query_ring(triton_cpu, index_dtype):
    # query_cache (L, M, W, H_q, D): write one layer's queries into ring slots
    L, M, W, Hq, D, N = 2, 3, 8, 4, 80, 5
    qc = torch.randn(L, M, W, Hq, D)
    ref = qc.clone()
    q = torch.randn(N, Hq, D)
    slot = torch.tensor([0, 2, 1, 2, 0])
    pos = torch.tensor([3, 9, 17, 4, 30])
    index = (slot * W + pos % W).to(index_dtype)
    index[2] = -1
    store_rows(q.view(N, -1), qc[1].view(M * W, Hq * D), index)
    store_rows_reference(q.view(N, -1), ref[1].view(M * W, Hq * D), index)
    torch.testing.assert_close(qc, ref, rtol=0, atol=0)
    assert torch.equal(qc[1, 2, 9 % W], q[1]) and torch.equal(qc[0], ref[0])
