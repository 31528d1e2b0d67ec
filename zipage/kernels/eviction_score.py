"""Eviction score: global score, pooling, redundancy mix, forced keeps (docs/method.md §6.2-6.8).

Per (layer, request, KV head), over physical slots j < phys_len = n:

    A'[j] = A[j] / max_{i < n - W} A[i]   with normalization "max", else A[j]
    S[j] = max(A'[j], decay * SC[j])  if j < num_history  else A'[j]       (global "max")
    S[j] = A'[j] + decay * SC[j]      if j < num_history  else A'[j]       (global "sum")
    P[j] = max_{|d| <= k//2, 0 <= j+d < n} S[j+d]   if the request pools, else S[j]
           (pooling "avg": the sum of those neighbours / k, zero padded)
    R[j] = softmax_j(rho[j] / (T * norm)),  norm = n (raw) or b (lightning);
           with normalization "max", R[j] / max_{i < n - W} R[i]
    F[j] = (1 - w) * P[j] - w * R[j]        (w = redundancy weight; F = P without redundancy)
    F = +inf on sinks (j < num_sink) and the window (j >= n - W); F = -inf for j >= n.
W here is the forced recent count (the observation window, or more with recent_ratio).

S is returned rather than written to the score cache here: compaction stores S[j] straight
into the kept token's target slot. This keeps S free of in-place read/write hazards between
neighbouring pooled slots and never writes into shared prefix blocks (docs/method.md §13).
"""
import torch
import torch.nn.functional as F_

from zipage.kernels._dispatch import tl, triton
from zipage.kernels.block_tables import check_tables, gather_positions
from zipage.kernels.paged_tiles import paged_offsets

_TILE = 256


@triton.jit
def _global_at(a_row_ptr, score_cache_ptr, table_row_ptr, score_head_offset,
               stride_score_block, stride_score_slot, pos, n, num_hist, decay, inv_a_max,
               BLOCK_SIZE: tl.constexpr, GLOBAL: tl.constexpr, GLOBAL_SUM: tl.constexpr):
    """S at positions pos (any int vector); returns (S, valid)."""
    ok = (pos >= 0) & (pos < n)
    a = tl.load(a_row_ptr + pos, mask=ok, other=0.0) * inv_a_max
    if GLOBAL:
        hist = ok & (pos < num_hist)
        offsets = score_head_offset + paged_offsets(table_row_ptr, pos, hist,
                                                    stride_score_block, stride_score_slot,
                                                    BLOCK_SIZE)
        sc = decay * tl.load(score_cache_ptr + offsets, mask=hist, other=0.0).to(tl.float32)
        if GLOBAL_SUM:
            a = tl.where(hist, a + sc, a)
        else:
            a = tl.where(hist, tl.maximum(a, sc), a)
    return a, ok


@triton.jit(do_not_specialize=["stride_table_row", "num_cols"])
def _final_score_kernel(a_ptr, rho_ptr, score_cache_ptr, f_ptr, s_ptr, block_tables_ptr,
                        phys_lens_ptr, num_history_ptr, stride_a_layer, stride_a_req,
                        stride_a_head, stride_score_layer, stride_score_block,
                        stride_score_slot, stride_score_head, stride_table_row, num_cols,
                        window, num_sink, decay, red_weight, inv_temp,
                        BLOCK_SIZE: tl.constexpr, GLOBAL: tl.constexpr, HALF: tl.constexpr,
                        POOL_EVERY: tl.constexpr, REDUNDANCY: tl.constexpr,
                        GLOBAL_SUM: tl.constexpr, POOL_AVG: tl.constexpr,
                        NORM_MAX: tl.constexpr, TILE: tl.constexpr):
    kv_head = tl.program_id(0)
    req = tl.program_id(1)
    layer = tl.program_id(2).to(tl.int64)
    n = tl.load(phys_lens_ptr + req)
    num_hist = tl.load(num_history_ptr + req)
    # A, rho, F, S share one contiguous layout
    row = layer * stride_a_layer + req * stride_a_req + kv_head * stride_a_head
    score_head_offset = layer * stride_score_layer + kv_head * stride_score_head
    table_row = block_tables_ptr + req * stride_table_row
    if POOL_EVERY:
        pool = num_hist >= 0
    else:  # default: pool only at a request's first compression
        pool = num_hist == 0
    cols = tl.arange(0, TILE)
    inv_a_max = n.to(tl.float32) * 0.0 + 1.0  # a scalar tensor either way
    if NORM_MAX:  # max of A over the scored (non-window) slots
        a_max = tl.zeros([TILE], tl.float32)
        for start in range(0, n, TILE):
            j = start + cols
            a_max = tl.maximum(a_max, tl.load(a_ptr + row + j, mask=j < n - window, other=0.0))
        top = tl.max(a_max, 0)
        inv_a_max = 1.0 / tl.where(top > 0, top, 1.0)
    if REDUNDANCY != 0:  # softmax statistics of rho / (T * norm), per lane then combined
        if REDUNDANCY == 1:
            scale = inv_temp / n.to(tl.float32)  # raw: normalise by the valid length
        else:
            scale = inv_temp / BLOCK_SIZE  # lightning: by the block size
        m_v = tl.full([TILE], -1e30, tl.float32)
        l_v = tl.zeros([TILE], tl.float32)
        for start in range(0, n, TILE):
            j = start + cols
            x = tl.load(rho_ptr + row + j, mask=j < n, other=float("-inf")) * scale
            m_new = tl.maximum(m_v, x)
            l_v = l_v * tl.exp(m_v - m_new) + tl.exp(x - m_new)
            m_v = m_new
        m_i = tl.max(m_v, 0)
        l_i = tl.sum(l_v * tl.exp(m_v - m_i), 0)
        if NORM_MAX:  # R / max R = exp(x - m) over the scored slots: use their max
            r_v = tl.full([TILE], -1e30, tl.float32)
            for start in range(0, n, TILE):
                j = start + cols
                x = tl.load(rho_ptr + row + j, mask=j < n - window, other=-1e30) * scale
                r_v = tl.maximum(r_v, x)
            m_i = tl.max(r_v, 0)
            l_i = m_i * 0.0 + 1.0
    for start in range(0, num_cols, TILE):
        j = start + cols
        s0, ok = _global_at(a_ptr + row, score_cache_ptr, table_row, score_head_offset,
                            stride_score_block, stride_score_slot, j, n, num_hist, decay,
                            inv_a_max, BLOCK_SIZE, GLOBAL, GLOBAL_SUM)
        if POOL_AVG:
            pooled = tl.where(ok, s0, 0.0)
        else:
            pooled = tl.where(ok, s0, float("-inf"))
        for t in tl.static_range(2 * HALF + 1):  # neighbours recomputed: no cross-tile halo
            if t != HALF:
                st, ok_t = _global_at(a_ptr + row, score_cache_ptr, table_row,
                                      score_head_offset, stride_score_block,
                                      stride_score_slot, j + (t - HALF), n, num_hist, decay,
                                      inv_a_max, BLOCK_SIZE, GLOBAL, GLOBAL_SUM)
                if POOL_AVG:
                    pooled += tl.where(ok_t, st, 0.0)
                else:
                    pooled = tl.maximum(pooled, tl.where(ok_t, st, float("-inf")))
        if POOL_AVG:
            pooled = pooled / (2 * HALF + 1)
        f = tl.where(pool, pooled, s0)
        if REDUNDANCY != 0:
            x = tl.load(rho_ptr + row + j, mask=ok, other=0.0) * scale
            f = (1.0 - red_weight) * f - red_weight * (tl.exp(x - m_i) / l_i)
        f = tl.where((j < num_sink) | (j >= n - window), float("inf"), f)
        f = tl.where(ok, f, float("-inf"))
        tl.store(f_ptr + row + j, f, mask=j < num_cols)
        if GLOBAL:
            tl.store(s_ptr + row + j, tl.where(ok, s0, 0.0), mask=j < num_cols)


def final_score(A, rho, score_cache, block_tables, phys_lens, num_history, *, window: int,
                num_sink: int = 0, decay: float = 0.8, pooling_kernel_size: int = 1,
                pool_every_compression: bool = False, redundancy_mode: str = "none",
                redundancy_weight: float = 0.8, temperature: float = 0.4,
                global_mode: str = "max", pooling_mode: str = "max",
                normalization: str = "none"):
    """Eviction score F (and global score S) of every slot (Triton).

    A:            float32 (L, B, H_kv, N) attention score, N = n_max * b, contiguous
    rho:          float32 (L, B, H_kv, N) redundancy sums, or None when redundancy_mode="none"
    score_cache:  (L, NB, b, H_kv) global-score cache (read only), or None: no global score
    block_tables: int32 (B, n_max);  phys_lens, num_history: int32 (B,)
    pooling_kernel_size: odd, 1 = off; pooling applies where num_history == 0 unless
                  pool_every_compression;  redundancy_mode: "none" | "raw" | "lightning"
    global_mode:  "max" | "sum";  pooling_mode: "max" | "avg";  normalization: "none" | "max"
    returns       (F float32 (L, B, H_kv, N), S float32 like A or None without score_cache)
    """
    L, B, H, N = A.shape
    check_tables(block_tables, phys_lens)
    assert A.is_contiguous() and (rho is None or rho.shape == A.shape and rho.is_contiguous())
    red = {"none": 0, "raw": 1, "lightning": 2}[redundancy_mode]
    assert (rho is None) == (red == 0) and pooling_kernel_size % 2 == 1
    b = N // block_tables.shape[1]
    glob = score_cache is not None
    F = torch.empty_like(A)
    S = torch.empty_like(A) if glob else None
    sc = score_cache if glob else A  # dummy pointer when unused
    ssc = score_cache.stride() if glob else (0, 0, 0, 0)
    _final_score_kernel[(H, B, L)](
        A, rho if red else A, sc, F, S if glob else F, block_tables, phys_lens, num_history,
        *A.stride()[:3], *ssc, block_tables.stride(0), N, window, num_sink, float(decay),
        float(redundancy_weight), 1.0 / temperature, BLOCK_SIZE=b, GLOBAL=glob,
        HALF=pooling_kernel_size // 2, POOL_EVERY=bool(pool_every_compression),
        REDUNDANCY=red, GLOBAL_SUM=global_mode == "sum", POOL_AVG=pooling_mode == "avg",
        NORM_MAX=normalization == "max", TILE=_TILE, num_warps=4)
    return F, S


def final_score_reference(A, rho, score_cache, block_tables, phys_lens, num_history, *,
                          window: int, num_sink: int = 0, decay: float = 0.8,
                          pooling_kernel_size: int = 1, pool_every_compression: bool = False,
                          redundancy_mode: str = "none", redundancy_weight: float = 0.8,
                          temperature: float = 0.4, global_mode: str = "max",
                          pooling_mode: str = "max", normalization: str = "none"):
    """PyTorch version of final_score (one request at a time)."""
    L, B, H, N = A.shape
    b = N // block_tables.shape[1]
    F = torch.full_like(A, float("-inf"))
    S = torch.zeros_like(A) if score_cache is not None else None
    for s in range(B):
        n, n_hist = int(phys_lens[s]), int(num_history[s])
        scored = max(n - window, 0)  # the normalisations' max runs over non-window slots
        sc_s = A[:, s, :, :n].clone()
        if normalization == "max":
            top = sc_s[..., :scored].amax(-1, keepdim=True) if scored else torch.ones_like(
                sc_s[..., :1])
            sc_s = sc_s / torch.where(top > 0, top, torch.ones_like(top))
        if score_cache is not None:
            hist = decay * gather_positions(score_cache, block_tables[s], n_hist).float()
            old = sc_s[..., :n_hist]
            hist = hist.transpose(1, 2)  # (L, H, nh)
            sc_s[..., :n_hist] = old + hist if global_mode == "sum" else torch.maximum(old, hist)
            S[:, s, :, :n] = sc_s
        f = sc_s
        if pooling_kernel_size > 1 and (n_hist == 0 or pool_every_compression):
            k = pooling_kernel_size  # max_pool1d pads with -inf: positions >= n never count
            pool = F_.avg_pool1d if pooling_mode == "avg" else F_.max_pool1d  # avg: zero pad
            f = pool(sc_s.reshape(L * H, 1, n), k, 1, k // 2).view(L, H, n)
        if redundancy_mode != "none":
            norm = n if redundancy_mode == "raw" else b
            r = (rho[:, s, :, :n] / (temperature * norm)).softmax(-1)
            if normalization == "max" and scored:
                r = r / r[..., :scored].amax(-1, keepdim=True)
            f = (1 - redundancy_weight) * f - redundancy_weight * r
        f = f.clone()
        f[..., :num_sink] = float("inf")
        f[..., max(n - window, 0):] = float("inf")
        F[:, s, :, :n] = f
    return F, S


def select_keep(F, num_keep: int):
    """Top-num_keep mask per (layer, request, head): uint8 (L, B, H_kv, N), 1 = keep."""
    idx = torch.topk(F, num_keep, dim=-1, sorted=False).indices
    return torch.zeros(F.shape, dtype=torch.uint8, device=F.device).scatter_(-1, idx, 1)
