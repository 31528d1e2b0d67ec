"""Final score (docs/method.md §6.2-6.8) and top-K selection."""
import pytest
import torch
from compression_scene import MIXED, make_scene

from zipage.kernels.block_tables import gather_positions
from zipage.kernels.eviction_score import final_score, final_score_reference, select_keep

W = 8


def _inputs(sc, redundancy):
    """Random attention scores and redundancy sums, zero at invalid slots like the kernels'."""
    bt = sc.batch
    L, H, N = sc.k.shape[0], sc.k.shape[3], bt.block_tables.shape[1] * sc.b
    valid = torch.arange(N)[None, :] < bt.phys_lens[:, None]  # (B, N)
    A = torch.rand(L, bt.size, H, N) * valid[None, :, None]
    A[..., 5:9] = A[..., 5:6]  # equal neighbours: pooling plateaus
    rho = None if redundancy == "none" else torch.randn(L, bt.size, H, N) * 3 * valid[:, None]
    return A, rho


CASES = [  # (global, pooling kernel, pool every, redundancy, sinks)
    (False, 1, False, "none", 0),
    (True, 5, False, "lightning", 0),
    (True, 3, True, "raw", 3),
    (False, 5, False, "raw", 2),
    (True, 1, False, "none", 0),
]


@pytest.mark.parametrize("glob,pool,every,red,sink", CASES)
def test_kernel_matches_reference(triton_cpu, glob, pool, every, red, sink):
    sc = make_scene(MIXED)
    A, rho = _inputs(sc, red)
    bt = sc.batch
    args = (A, rho, sc.sc if glob else None, bt.block_tables, bt.phys_lens, bt.num_history)
    kw = dict(window=W, num_sink=sink, pooling_kernel_size=pool, pool_every_compression=every,
              redundancy_mode=red, decay=0.8, redundancy_weight=0.8, temperature=0.4)
    F, S = final_score(*args, **kw)
    Fr, Sr = final_score_reference(*args, **kw)
    torch.testing.assert_close(F, Fr)
    if glob:  # the global update is elementwise: exact
        torch.testing.assert_close(S, Sr, rtol=0, atol=0)
    else:
        assert S is None and Sr is None


def _naive(A, rho, sc, s, l, h, n, cfg):
    """Loop version of docs/method.md §6.2-6.8 for one (layer, request, head)."""
    bt, (decay, k, every, red, w, T, sink) = sc.batch, cfg
    nh = int(bt.num_history[s])
    hist = gather_positions(sc.sc, bt.block_tables[s], nh)[l, :, h].tolist()
    S = [max(float(A[l, s, h, j]), decay * hist[j]) if j < nh else float(A[l, s, h, j])
         for j in range(n)]
    pool = k > 1 and (nh == 0 or every)
    P = [max(S[max(0, j - k // 2): j + k // 2 + 1]) if pool else S[j] for j in range(n)]
    if red != "none":
        x = torch.tensor([float(rho[l, s, h, j]) for j in range(n)], dtype=torch.float64)
        R = (x / (T * (n if red == "raw" else sc.b))).softmax(0).tolist()
        P = [(1 - w) * P[j] - w * R[j] for j in range(n)]
    F = [float("inf") if j < sink or j >= n - W else P[j] for j in range(n)]
    return torch.tensor(F), torch.tensor(S)


@pytest.mark.parametrize("red", ["raw", "lightning"])
def test_reference_matches_naive(red):
    sc = make_scene(MIXED, L=1, H=1)
    A, rho = _inputs(sc, red)
    bt = sc.batch
    cfg = (0.8, 5, False, red, 0.8, 0.4, 2)
    F, S = final_score_reference(A, rho, sc.sc, bt.block_tables, bt.phys_lens, bt.num_history,
                                 window=W, num_sink=2, pooling_kernel_size=5, decay=0.8,
                                 redundancy_mode=red, redundancy_weight=0.8, temperature=0.4)
    for s, n in enumerate(bt.phys_lens.tolist()):
        Fn, Sn = _naive(A, rho, sc, s, 0, 0, n, cfg)
        torch.testing.assert_close(F[0, s, 0, :n], Fn.float())
        torch.testing.assert_close(S[0, s, 0, :n], Sn.float())
        assert bool((F[0, s, 0, n:] == float("-inf")).all())


@pytest.mark.parametrize("sink", [0, 4])
def test_select_keep_invariants(triton_cpu, sink):
    sc = make_scene(MIXED)
    A, rho = _inputs(sc, "lightning")
    bt = sc.batch
    F, _ = final_score(A, rho, None, bt.block_tables, bt.phys_lens, bt.num_history, window=W,
                       num_sink=sink, pooling_kernel_size=5, redundancy_mode="lightning")
    keep = select_keep(F, bt.num_keep)
    assert keep.dtype == torch.uint8
    assert bool((keep.sum(-1) == bt.num_keep).all())  # exactly K per (layer, request, head)
    for s, n in enumerate(bt.phys_lens.tolist()):
        assert bool((keep[:, s, :, n - W:n] == 1).all())  # window
        assert bool((keep[:, s, :, :sink] == 1).all())  # sinks
        assert bool((keep[:, s, :, n:] == 0).all())  # invalid slots
