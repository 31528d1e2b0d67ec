"""Key redundancy sums rho (docs/method.md §6.5 raw, §6.6 lightning).

With unit keys u_j = k_j / max(|k_j|, 1e-6) (rounded to the cache dtype), c(i, j) = u_i . u_j
over valid pairs i != j (lightning: only pairs in the same physical block), and
l(j) = max{i : c(i, j) > tau} the most recent similar partner of j (exempt from the charge):

    rho(i) = sum_j c(i, j) - sum_{j : l(j) = i} c(i, j)

The softmax R = softmax_j(rho / (T * norm)) is applied later, in eviction_score.
c is symmetric, so one program per (tile of columns j, KV head, request x layer) walks the
rows i once and gets both sum_i c(i, j) (= the row sum of j) and l(j), c(l(j), j). Both
contributions are added with atomics into a zeroed rho: row sums to j, the exemption
-c(l(j), j) to l(j). Raw is O(n^2 D) per (layer, request, head); lightning O(n b D).
An FP8 cache needs no scales here: a key's scale is per (token, head), so it cancels in u_j;
the unit keys are rounded to unit_dtype (the model dtype) instead of the cache dtype.
"""
import torch

from zipage.kernels._dispatch import cdiv, next_pow2, tl, triton
from zipage.kernels.block_tables import check_tables, gather_positions
from zipage.kernels.fp8 import dot_dtype
from zipage.kernels.paged_tiles import dot_args, dot_operand, load_kv_tile, paged_offsets

_TILE = 64  # rows / columns per tile


@triton.jit
def _unit_keys(k_cache_ptr, table_row_ptr, head_offset, stride_k_block, stride_k_slot, pos,
               ok, BLOCK_SIZE: tl.constexpr, HEAD_DIM: tl.constexpr,
               HEAD_DIM_PAD: tl.constexpr, DOT_DTYPE: tl.constexpr):
    """Unit-norm keys of positions pos (fp32 norm, result rounded to DOT_DTYPE)."""
    offsets = head_offset + paged_offsets(table_row_ptr, pos, ok, stride_k_block,
                                          stride_k_slot, BLOCK_SIZE)
    k = load_kv_tile(k_cache_ptr, offsets, ok, HEAD_DIM,
                     HEAD_DIM_PAD).to(tl.float32)  # no scale: it cancels in k / |k|
    norm = tl.maximum(tl.sqrt(tl.sum(k * k, 1)), 1e-6)
    return dot_operand(k / norm[:, None], DOT_DTYPE)


@triton.jit(do_not_specialize=["batch", "stride_table_row"])
def _redundancy_kernel(k_cache_ptr, rho_ptr, block_tables_ptr, phys_lens_ptr, batch,
                       stride_k_layer, stride_k_block, stride_k_slot, stride_k_head,
                       stride_rho_layer, stride_rho_req, stride_rho_head, stride_table_row,
                       tau, HEAD_DIM: tl.constexpr, BLOCK_SIZE: tl.constexpr,
                       LIGHTNING: tl.constexpr, TILE: tl.constexpr,
                       HEAD_DIM_PAD: tl.constexpr, DOT_DTYPE: tl.constexpr,
                       DOT_PREC: tl.constexpr):
    col_tile = tl.program_id(0)
    kv_head = tl.program_id(1)
    req = tl.program_id(2) % batch
    layer = (tl.program_id(2) // batch).to(tl.int64)
    n = tl.load(phys_lens_ptr + req)
    j = col_tile * TILE + tl.arange(0, TILE)
    j_ok = j < n
    table_row = block_tables_ptr + req * stride_table_row
    head_offset = layer * stride_k_layer + kv_head * stride_k_head
    u_j = _unit_keys(k_cache_ptr, table_row, head_offset, stride_k_block, stride_k_slot, j,
                     j_ok, BLOCK_SIZE, HEAD_DIM, HEAD_DIM_PAD, DOT_DTYPE)
    if LIGHTNING:  # a column tile never straddles a block (TILE divides BLOCK_SIZE)
        i_lo = (col_tile * TILE // BLOCK_SIZE) * BLOCK_SIZE
        i_hi = tl.minimum(i_lo + BLOCK_SIZE, n)
    else:
        i_lo = 0
        i_hi = n
    i_hi = tl.where(col_tile * TILE < n, i_hi, i_lo)  # padding tile: empty loop
    col_sum = tl.zeros([TILE], tl.float32)
    partner = tl.full([TILE], -1, tl.int32)  # l(j), -1 = none
    partner_c = tl.zeros([TILE], tl.float32)  # c(l(j), j)
    for i0 in range(i_lo, i_hi, TILE):
        i = i0 + tl.arange(0, TILE)
        i_ok = i < i_hi
        u_i = _unit_keys(k_cache_ptr, table_row, head_offset, stride_k_block, stride_k_slot,
                         i, i_ok, BLOCK_SIZE, HEAD_DIM, HEAD_DIM_PAD, DOT_DTYPE)
        c = tl.dot(u_i, tl.trans(u_j), input_precision=DOT_PREC)  # (rows i, columns j)
        pair = i_ok[:, None] & j_ok[None, :] & (i[:, None] != j[None, :])
        c = tl.where(pair, c, 0.0)
        col_sum += tl.sum(c, 0)
        # rows ascend across iterations, so the latest tile with a hit holds l(j)
        tile_max = tl.max(tl.where(pair & (c > tau), i[:, None], -1), 0)
        tile_c = tl.sum(tl.where(i[:, None] == tile_max[None, :], c, 0.0), 0)
        hit = tile_max >= 0
        partner = tl.where(hit, tile_max, partner)
        partner_c = tl.where(hit, tile_c, partner_c)
    rho = rho_ptr + layer * stride_rho_layer + req * stride_rho_req + kv_head * stride_rho_head
    tl.atomic_add(rho + j, col_sum, mask=j_ok)
    tl.atomic_add(rho + partner, -partner_c, mask=j_ok & (partner >= 0))


def redundancy(k_cache, block_tables, phys_lens, lightning: bool, threshold: float,
               unit_dtype=None):
    """Redundancy sums rho of every physical slot (Triton).

    k_cache:      (L, NB, b, H_kv, D), last dim contiguous; lightning needs b % 16 == 0
    block_tables: int32 (B, n_max), -1 padded;  phys_lens: int32 (B,)
    lightning:    restrict pairs to the same physical block
    threshold:    cosine tau above which a pair counts as similar
    unit_dtype:   dtype of the unit keys of an fp8 cache (the model dtype; default bf16);
                  a full-precision cache uses its own dtype
    returns       float32 (L, B, H_kv, n_max * b); 0 at slots >= phys_len
    """
    L, NB, b, H, D = k_cache.shape
    check_tables(block_tables, phys_lens)
    assert k_cache.stride(-1) == 1
    B, n_max = block_tables.shape
    tile = _TILE
    if lightning:
        tile = min(_TILE, b & -b)  # largest power of two dividing b, capped
        assert tile >= 16, "lightning redundancy needs a block size divisible by 16"
    rho = torch.zeros(L, B, H, n_max * b, dtype=torch.float32, device=k_cache.device)
    grid = (cdiv(n_max * b, tile), H, B * L)
    _redundancy_kernel[grid](
        k_cache, rho, block_tables, phys_lens, B, *k_cache.stride()[:4], *rho.stride()[:3],
        block_tables.stride(0), float(threshold), HEAD_DIM=D, BLOCK_SIZE=b,
        LIGHTNING=bool(lightning), TILE=tile, HEAD_DIM_PAD=max(16, next_pow2(D)),
        **dot_args(_unit_dtype(k_cache, unit_dtype)), num_warps=4)
    return rho


def _unit_dtype(k_cache, unit_dtype):
    return dot_dtype(k_cache.dtype, unit_dtype or torch.bfloat16)


def redundancy_reference(k_cache, block_tables, phys_lens, lightning: bool, threshold: float,
                         unit_dtype=None):
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
        u = k / k.norm(dim=-1, keepdim=True).clamp_min(1e-6)
        u = u.to(_unit_dtype(k_cache, unit_dtype)).float()
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
