"""Random compression batches with poisoned caches: the aliasing cases of docs/method.md §7.

Request kinds (C retained blocks, N = C + 1 target blocks):
  "compressed": already compressed, n = N * b, num_history = C * b, target = source table
  "first":      first compression, target = source[:N]
  "long":       prompt longer than the cap (partial last block), target = source[:N]
  "shared":     first `shared` blocks are shared (with request `prefix_of` when given):
                target = fresh * min(shared, C) + source[shared : ...]
Every cache slot no request may read holds NaN, so a stray read shows up.
"""
from dataclasses import dataclass

import torch

from zipage.compression import CompressionBatch
from zipage.kernels.block_tables import flat_slots
from zipage.kernels.eviction_score import select_keep


@dataclass
class Scene:
    k: torch.Tensor  # (L, NB, b, H_kv, D)
    v: torch.Tensor
    q: torch.Tensor  # (L, M, W, H_q, D)
    sc: torch.Tensor  # (L, NB, b, H_kv) score cache
    batch: CompressionBatch
    b: int
    C: int


def _window_pos(n: int, W: int, evicted: int) -> torch.Tensor:
    """Ring index w holds logical position t (t % W == w) of the last W logical tokens."""
    t = torch.arange(n + evicted - W, n + evicted)
    pos = torch.empty(W, dtype=torch.int32)
    pos[t % W] = (t - evicted).int()
    return pos


def make_scene(specs, *, L=2, b=16, C=2, H=2, G=2, D=16, W=8, M=5, dtype=torch.float32,
               device="cpu"):
    """specs: list of dicts with keys kind, n (phys_len; default N * b), shared, prefix_of."""
    N = C + 1
    B = len(specs)
    lens = [sp.get("n", N * b) for sp in specs]
    nblk = [-(-n // b) for n in lens]
    NB = sum(nblk) + C * B + 2
    pool = torch.randperm(NB).tolist()
    tables, targets, hist = [], [], []
    for sp, nb in zip(specs, nblk):
        kind, shared = sp["kind"], sp.get("shared", 0)
        if "prefix_of" in sp:
            src = tables[sp["prefix_of"]][:shared] + [pool.pop() for _ in range(nb - shared)]
        else:
            src = [pool.pop() for _ in range(nb)]
        fresh = min(shared, C) if kind == "shared" else 0
        tgt = [pool.pop() for _ in range(fresh)] + src[shared if fresh else 0:][:N - fresh]
        assert len(tgt) == N
        tables.append(src)
        targets.append(tgt)
        hist.append(C * b if kind == "compressed" else 0)
    table = torch.full((B, max(nblk)), -1, dtype=torch.int32)
    for s, src in enumerate(tables):
        table[s, : len(src)] = torch.tensor(src, dtype=torch.int32)
    shape = (L, NB, b, H, D)
    k = torch.full(shape, float("nan"), dtype=dtype, device=device)
    v = torch.full(shape, float("nan"), dtype=dtype, device=device)
    sc = torch.full((L, NB, b, H), float("nan"), device=device)
    for s, n in enumerate(lens):
        j = torch.arange(n)
        blk, off = table[s].long()[j // b], j % b
        if "prefix_of" in specs[s]:  # shared blocks already hold the other request's keys
            keep_old = j < specs[s]["shared"] * b
            blk, off = blk[~keep_old], off[~keep_old]
        blk, off = blk.to(device), off.to(device)
        k[:, blk, off] = torch.randn(L, len(blk), H, D, device=device).to(dtype)
        v[:, blk, off] = torch.randn(L, len(blk), H, D, device=device).to(dtype)
        jh = torch.arange(hist[s])
        sc[:, table[s].long()[jh // b].to(device), (jh % b).to(device)] = \
            torch.rand(L, hist[s], H, device=device)
    q = torch.randn(L, M, W, H * G, D, device=device).to(dtype)
    i32 = dict(dtype=torch.int32, device=device)
    batch = CompressionBatch(
        slots=torch.randperm(M)[:B].to(**i32),
        block_tables=table.to(device),
        target_tables=torch.tensor(targets, **i32),
        phys_lens=torch.tensor(lens, **i32),
        window_pos=torch.stack([_window_pos(n, W, s * 3) for s, n in enumerate(lens)]).to(device),
        num_history=torch.tensor(hist, **i32),
        num_keep=C * b)
    batch.check_values(b, W)
    return Scene(k, v, q, sc, batch, b, C)


MIXED = [  # every aliasing case, padded tables of different lengths, a partial last block
    dict(kind="compressed"),
    dict(kind="long", n=4 * 16 + 5),
    dict(kind="first", n=3 * 16 - 3),
    dict(kind="shared", shared=1),
]


def expected_compaction(sc, keep, S):
    """Caches after compaction, by an independent per-(layer, request, head) copy from an
    untouched original; the score cache receives S (if given) at the target slots."""
    k, v, cache = sc.k.clone(), sc.v.clone(), sc.sc.clone()
    bt = sc.batch
    for s, n in enumerate(bt.phys_lens.tolist()):
        src = flat_slots(bt.block_tables[s], n, sc.b)
        dst = flat_slots(bt.target_tables[s], bt.num_keep, sc.b)
        for l in range(k.shape[0]):
            for h in range(k.shape[3]):
                kept = keep[l, s, h, :n].nonzero().flatten().tolist()
                assert len(kept) == bt.num_keep
                for p, j in enumerate(kept):
                    for new, old in ((k, sc.k), (v, sc.v)):
                        new.view(new.shape[0], -1, *new.shape[3:])[l, dst[p], h] = \
                            old.view(old.shape[0], -1, *old.shape[3:])[l, src[j], h]
                    if S is not None:
                        cache.view(cache.shape[0], -1, cache.shape[3])[l, dst[p], h] = \
                            S[l, s, h, j]
    return k, v, cache


def random_keep(sc):
    """Random top-K mask (window kept, invalid never) and a random global score S."""
    bt = sc.batch
    L, H, N = sc.k.shape[0], sc.k.shape[3], bt.block_tables.shape[1] * sc.b
    F = torch.rand(L, bt.size, H, N)
    for s, n in enumerate(bt.phys_lens.tolist()):
        F[:, s, :, n - 8:n] = float("inf")
        F[:, s, :, n:] = float("-inf")
    return select_keep(F, bt.num_keep), torch.rand(L, bt.size, H, N)
