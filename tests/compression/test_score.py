"""Attention score (docs/method.md §6.1): Triton kernel vs reference, reference vs a naive loop."""
import math

import pytest
import torch
from compression_scene import MIXED, make_scene

from zipage.kernels.block_tables import gather_positions
from zipage.kernels.attention_score import attention_score, attention_score_reference


def _args(sc):
    bt = sc.batch
    return sc.k, sc.q, bt.slots, bt.block_tables, bt.phys_lens, bt.window_pos


@pytest.mark.parametrize("G,D,W", [(1, 16, 8), (2, 32, 8), (2, 16, 6), (3, 16, 8)])
def test_kernel_matches_reference(triton_cpu, G, D, W):
    sc = make_scene(MIXED, G=G, D=D, W=W)
    out = attention_score(*_args(sc))
    torch.testing.assert_close(out, attention_score_reference(*_args(sc)))


def test_kernel_bf16(triton_cpu):
    sc = make_scene(MIXED[:2], dtype=torch.bfloat16)
    out = attention_score(*_args(sc))
    torch.testing.assert_close(out, attention_score_reference(*_args(sc)), rtol=1e-4,
                               atol=1e-5)


def _naive(sc, l, s, h):
    """Per key j: mean over window rows of the max over the group of the softmax prob."""
    bt = sc.batch
    n, G = int(bt.phys_lens[s]), sc.q.shape[3] // sc.k.shape[3]
    keys = gather_positions(sc.k, bt.block_tables[s], n)[l, :, h].double()
    W, D = sc.q.shape[2], sc.k.shape[-1]
    score = [0.0] * n
    for r in range(W):
        i = int(bt.window_pos[s, r])
        best = [0.0] * n
        for g in range(G):
            qv = sc.q[l, int(bt.slots[s]), r, h * G + g].double()
            z = [float(qv @ keys[j]) / math.sqrt(D) for j in range(i + 1)]
            zmax = max(z)
            e = [math.exp(x - zmax) for x in z]
            for j in range(i + 1):
                best[j] = max(best[j], e[j] / sum(e))
        for j in range(n):
            score[j] += best[j] / W
    return torch.tensor(score)


def test_reference_matches_naive():
    sc = make_scene([dict(kind="first", n=37), dict(kind="compressed")], L=1, C=1, W=4)
    ref = attention_score_reference(*_args(sc))
    for s, n in enumerate(sc.batch.phys_lens.tolist()):
        for h in range(2):
            torch.testing.assert_close(ref[0, s, h, :n], _naive(sc, 0, s, h).float())
        assert bool((ref[0, s, :, n:] == 0).all())
