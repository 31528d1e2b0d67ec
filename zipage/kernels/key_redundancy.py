"""Key redundancy sums rho (method spec §5.5 raw, §5.6 lightning).

With unit keys u_j = k_j / max(|k_j|, 1e-6) (rounded to the cache dtype), c(i, j) = u_i . u_j
over valid pairs i != j (lightning: only pairs in the same physical block), and
l(j) = max{i : c(i, j) > tau} the most recent similar partner of j (exempt from the charge):

    rho(i) = sum_j c(i, j) - sum_{j : l(j) = i} c(i, j)

The softmax R = softmax_j(rho / (T * norm)) is applied later, in eviction_score.
c is symmetric, so one program per (tile of columns j, KV head, request x layer) walks the
rows i once and gets both sum_i c(i, j) (= the row sum of j) and l(j), c(l(j), j). Both
contributions are added with atomics into a zeroed rho: row sums to j, the exemption
-c(l(j), j) to l(j). Raw is O(n^2 D) per (layer, request, head); lightning O(n b D).
"""
import torch

from zipage.kernels._dispatch import cdiv, dot_precision, next_pow2, tl, triton
from zipage.kernels.compression_common import (UPCAST_DOTS, check_tables, dot_f32,
                                            gather_positions, round_like)

_BLOCK = 64  # rows / columns per tile


@triton.jit
def _unit_keys(k_ptr, tables, s, st_b, base, sk_nb, sk_b, pos, ok, D, b: tl.constexpr,
               BLOCK_D: tl.constexpr, UPCAST: tl.constexpr):
    """Unit-norm keys of positions pos (fp32 norm, result rounded to the cache dtype)."""
    d = tl.arange(0, BLOCK_D)
    blk = tl.load(tables + s * st_b + pos // b, mask=ok, other=0).to(tl.int64)
    off = base + blk * sk_nb + (pos % b) * sk_b
    k = tl.load(k_ptr + off[:, None] + d[None, :], mask=ok[:, None] & (d[None, :] < D),
                other=0.0).to(tl.float32)
    norm = tl.maximum(tl.sqrt(tl.sum(k * k, 1)), 1e-6)
    return round_like(k / norm[:, None], k_ptr, UPCAST)


# batch size and table width change from step to step: one compiled variant serves all
@triton.jit(do_not_specialize=["B", "st_b"])
def _redundancy_kernel(k_ptr, rho_ptr, tables, phys_lens, B, sk_l, sk_nb, sk_b, sk_h,
                       sr_l, sr_b, sr_h, st_b, D, tau, b: tl.constexpr, LIGHTNING: tl.constexpr,
                       BLOCK: tl.constexpr, BLOCK_D: tl.constexpr, PRECISION: tl.constexpr,
                       UPCAST: tl.constexpr):
    h = tl.program_id(1)
    s = tl.program_id(2) % B
    l = (tl.program_id(2) // B).to(tl.int64)
    n = tl.load(phys_lens + s)
    j = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    j_ok = j < n
    base = l * sk_l + h * sk_h
    u_j = _unit_keys(k_ptr, tables, s, st_b, base, sk_nb, sk_b, j, j_ok, D, b, BLOCK_D,
                     UPCAST)
    if LIGHTNING:  # a column tile never straddles a block (BLOCK divides b)
        i_lo = (tl.program_id(0) * BLOCK // b) * b
        i_hi = tl.minimum(i_lo + b, n)
    else:
        i_lo = 0
        i_hi = n
    i_hi = tl.where(tl.program_id(0) * BLOCK < n, i_hi, i_lo)  # padding tile: empty loop
    col_sum = tl.zeros([BLOCK], tl.float32)
    partner = tl.full([BLOCK], -1, tl.int32)  # l(j), -1 = none
    partner_c = tl.zeros([BLOCK], tl.float32)  # c(l(j), j)
    for i0 in range(i_lo, i_hi, BLOCK):
        i = i0 + tl.arange(0, BLOCK)
        i_ok = i < i_hi
        u_i = _unit_keys(k_ptr, tables, s, st_b, base, sk_nb, sk_b, i, i_ok, D, b,
                         BLOCK_D, UPCAST)
        c = dot_f32(u_i, tl.trans(u_j), PRECISION, UPCAST)  # (rows i, columns j)
        pair = i_ok[:, None] & j_ok[None, :] & (i[:, None] != j[None, :])
        c = tl.where(pair, c, 0.0)
        col_sum += tl.sum(c, 0)
        # rows ascend across iterations, so the latest tile with a hit holds l(j)
        tile_max = tl.max(tl.where(pair & (c > tau), i[:, None], -1), 0)
        tile_c = tl.sum(tl.where(i[:, None] == tile_max[None, :], c, 0.0), 0)
        hit = tile_max >= 0
        partner = tl.where(hit, tile_max, partner)
        partner_c = tl.where(hit, tile_c, partner_c)
    rho = rho_ptr + l * sr_l + s * sr_b + h * sr_h
    tl.atomic_add(rho + j, col_sum, mask=j_ok)
    tl.atomic_add(rho + partner, -partner_c, mask=j_ok & (partner >= 0))


def redundancy(k_cache, block_tables, phys_lens, lightning: bool, threshold: float):
    """Redundancy sums rho of every physical slot (Triton).

    k_cache:      (L, NB, b, H_kv, D), last dim contiguous; lightning needs b % 16 == 0
    block_tables: int32 (B, n_max), -1 padded;  phys_lens: int32 (B,)
    lightning:    restrict pairs to the same physical block
    threshold:    cosine tau above which a pair counts as similar
    returns       float32 (L, B, H_kv, n_max * b); 0 at slots >= phys_len
    """
    L, NB, b, H, D = k_cache.shape
    check_tables(block_tables, phys_lens)
    assert k_cache.stride(-1) == 1
    B, n_max = block_tables.shape
    block = _BLOCK
    if lightning:
        block = min(_BLOCK, b & -b)  # largest power of two dividing b, capped
        assert block >= 16, "lightning redundancy needs a block size divisible by 16"
    rho = torch.zeros(L, B, H, n_max * b, dtype=torch.float32, device=k_cache.device)
    grid = (cdiv(n_max * b, block), H, B * L)
    _redundancy_kernel[grid](
        k_cache, rho, block_tables, phys_lens, B, *k_cache.stride()[:4], *rho.stride()[:3],
        block_tables.stride(0), D, float(threshold), b=b, LIGHTNING=bool(lightning),
        BLOCK=block, BLOCK_D=max(16, next_pow2(D)), PRECISION=dot_precision(k_cache.dtype),
        UPCAST=UPCAST_DOTS, num_warps=4)
    return rho


def redundancy_reference(k_cache, block_tables, phys_lens, lightning: bool, threshold: float):
    """PyTorch version of redundancy: per request, dense similarity within each group of
    positions (lightning: each physical block, O(n b D); raw: the whole request, O(n^2 D))."""
    L, NB, b, H, D = k_cache.shape
    B, n_max = block_tables.shape
    rho = torch.zeros(L, B, H, n_max * b, dtype=torch.float32, device=k_cache.device)
    for s in range(B):
        n = int(phys_lens[s])
        if n == 0:
            continue
        k = gather_positions(k_cache, block_tables[s], n).float().transpose(1, 2)  # (L,H,n,D)
        u = (k / k.norm(dim=-1, keepdim=True).clamp_min(1e-6)).to(k_cache.dtype).float()
        group = b if lightning else n
        groups = -(-n // group)
        u = torch.nn.functional.pad(u, (0, 0, 0, groups * group - n))
        u = u.view(L, H, groups, group, D)
        valid = (torch.arange(groups * group, device=k.device) < n).view(groups, group)
        rho[:, s, :, :n] = _group_rho(u, valid, threshold).flatten(-2)[..., :n]
    return rho


def _group_rho(u, valid, threshold: float):
    """rho over unit keys u (..., G, m, D) where only pairs inside one group of m count."""
    m = u.shape[-2]
    pos = torch.arange(m, device=u.device)
    pair = (pos[:, None] != pos[None, :]) & valid[:, :, None] & valid[:, None, :]  # (G, m, m)
    c = (u @ u.transpose(-1, -2)) * pair  # (..., G, i, j)
    # l(j) = largest row i with c(i, j) > tau; (i + 1) * hit has its max there
    partner = (((c > threshold) & pair) * (pos[:, None] + 1)).amax(-2) - 1  # (..., G, j)
    hit = partner >= 0
    partner = partner.clamp_min(0)
    partner_c = c.gather(-2, partner.unsqueeze(-2)).squeeze(-2) * hit
    return c.sum(-1).scatter_add(-1, partner, -partner_c)
