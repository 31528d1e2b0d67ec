"""Helpers shared by the kernel tests: poisoned paged caches and a naive dense attention."""
import torch


def make_paged(ctx_lens, num_kv_heads, head_dim, block_size, dtype=torch.float32,
               extra_cols=1, spare_blocks=3):
    """Random paged K/V for sequences of `ctx_lens` keys, everything else poisoned.

    Blocks are assigned in random order; slots past each length, unused blocks and the
    memory just before/after the cache (where a -1 table entry would land) hold NaN, so a
    kernel that reads anything it should not produces NaN. Returns
    (k_cache, v_cache, block_tables int32 padded with -1, dense [(k, v)] per sequence).
    """
    nblk = [-(-n // block_size) for n in ctx_lens]
    NB = sum(nblk) + spare_blocks
    shape = (NB + 2, block_size, num_kv_heads, head_dim)
    k_store = torch.full(shape, float("nan"), dtype=dtype)
    v_store = torch.full(shape, float("nan"), dtype=dtype)
    k_cache, v_cache = k_store[1:-1], v_store[1:-1]  # contiguous views with NaN guards
    perm = torch.randperm(NB).tolist()
    table = torch.full((len(ctx_lens), max(nblk, default=0) + extra_cols), -1, dtype=torch.int32)
    dense = []
    for s, n in enumerate(ctx_lens):
        blocks = [perm.pop() for _ in range(nblk[s])]
        table[s, : nblk[s]] = torch.tensor(blocks, dtype=torch.int32)
        k = torch.randn(n, num_kv_heads, head_dim).to(dtype)
        v = torch.randn(n, num_kv_heads, head_dim).to(dtype)
        idx = torch.arange(n)
        slots = table[s].long()[idx // block_size] * block_size + idx % block_size
        k_cache.view(-1, num_kv_heads, head_dim)[slots] = k
        v_cache.view(-1, num_kv_heads, head_dim)[slots] = v
        dense.append((k, v))
    return k_cache, v_cache, table, dense


def naive_attention(q, k, v, scale, offset):
    """Dense causal attention, independent of the paged code: q (L, H_q, D), k/v (n, H_kv, D);
    query i sees keys j <= offset + i. fp64 via torch SDPA with an explicit mask."""
    G = q.shape[1] // k.shape[1]
    qh = q.double().transpose(0, 1)  # (H_q, L, D)
    kh = k.double().repeat_interleave(G, 1).transpose(0, 1)
    vh = v.double().repeat_interleave(G, 1).transpose(0, 1)
    i = torch.arange(q.shape[0])[:, None]
    j = torch.arange(k.shape[0])[None, :]
    mask = j <= offset + i
    o = torch.nn.functional.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask, scale=scale)
    return o.transpose(0, 1)
