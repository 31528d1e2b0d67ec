"""Comparison presets (docs/method.md §14): the new final-score modes (Triton vs reference)
and, per preset, the kept token indices against a small reference of the published rule."""
import math
from types import SimpleNamespace

import pytest
import torch
from compression_scene import MIXED, make_scene

from zipage.compression import CompressionConfig
from zipage.compression.pipeline import REFERENCE_OPS, TRITON_OPS, baseline_scores, score_layers
from zipage.kernels.block_tables import gather_positions
from zipage.kernels.eviction_score import final_score, final_score_reference, select_keep

W = 8
MODES = [  # (global, global_mode, pool, pooling_mode, every, redundancy, normalization)
    (True, "sum", 1, "max", False, "none", "none"),
    (True, "sum", 3, "avg", True, "raw", "none"),
    (False, "max", 5, "avg", False, "none", "none"),
    (True, "max", 1, "max", False, "raw", "max"),
    (True, "sum", 5, "avg", True, "lightning", "max"),
]


def _random_inputs(sc):
    bt = sc.batch
    L, H, N = sc.k.shape[0], sc.k.shape[3], bt.block_tables.shape[1] * sc.b
    valid = torch.arange(N)[None, :] < bt.phys_lens[:, None]
    A = torch.rand(L, bt.size, H, N) * valid[None, :, None]
    rho = torch.randn(L, bt.size, H, N) * 3 * valid[:, None]
    return A, rho


@pytest.mark.parametrize("glob,gmode,pool,pmode,every,red,norm", MODES)
def test_new_modes_kernel_matches_reference(triton_cpu, glob, gmode, pool, pmode, every, red,
                                            norm):
    sc = make_scene(MIXED)
    A, rho = _random_inputs(sc)
    rho = None if red == "none" else rho
    bt = sc.batch
    args = (A, rho, sc.sc if glob else None, bt.block_tables, bt.phys_lens, bt.num_history)
    kw = dict(window=W + 3, num_sink=1, pooling_kernel_size=pool, pool_every_compression=every,
              redundancy_mode=red, decay=0.7, redundancy_weight=0.5, temperature=1.0,
              global_mode=gmode, pooling_mode=pmode, normalization=norm)
    F, S = final_score(*args, **kw)
    Fr, Sr = final_score_reference(*args, **kw)
    torch.testing.assert_close(F, Fr)
    if glob:
        torch.testing.assert_close(S, Sr)


# -- each preset's own rule, written from the method's definition, one head at a time ------
def _pool(x, k, mode):
    n, h = len(x), k // 2
    if mode == "max":
        return [max(x[max(0, j - h): j + h + 1]) for j in range(n)]
    return [sum(x[max(0, j - h): j + h + 1]) / k for j in range(n)]  # zero padded (F.avg_pool1d)


def _softmax(x, scale):
    m = max(x)
    e = [math.exp((v - m) * scale) for v in x]
    return [v / sum(e) for v in e]


def _top(score, keep_last, keep_first, K):
    """Indices kept: the forced first/last ones plus the best of the rest, K in all."""
    n = len(score)
    forced = set(range(keep_first)) | set(range(n - keep_last, n))
    rest = sorted((j for j in range(n) if j not in forced), key=lambda j: -score[j])
    return sorted(forced | set(rest[:K - len(forced)]))


def rule_rkv(A, rho, hist, K):  # R-KV: lambda * maxpool7(A) - (1 - lambda) * softmax(rho / n)
    n = len(A)
    P, R = _pool(A, 7, "max"), _softmax(rho, 1.0 / n)
    return _top([0.1 * P[j] - 0.9 * R[j] for j in range(n)], 8, 0, K)


def rule_gkv(A, rho, hist, K):  # G-KV: max-normalised, global max (0.8), lambda 0.5
    n, W_ = len(A), 8  # the test's window (the preset's 16 does not fit K = 32 well)
    top = max(A[:n - W_])
    S = [a / top for a in A]
    S = [max(S[j], 0.8 * hist[j]) if j < len(hist) else S[j] for j in range(n)]
    R = _softmax(rho, 1.0 / n)
    rtop = max(R[:n - W_])
    return _top([0.5 * S[j] - 0.5 * R[j] / rtop for j in range(n)], W_, 0, K)


def rule_snapkv(A, rho, hist, K):  # SnapKV: avgpool5 of the window attention
    return _top(_pool(A, 5, "avg"), 8, 0, K)


def rule_h2o(A, rho, hist, K):  # H2O: accumulated attention; half the budget most recent
    n = len(A)
    S = [A[j] + hist[j] if j < len(hist) else A[j] for j in range(n)]
    return _top(S, math.ceil(K / 2), 0, K)


def rule_streaming(A, rho, hist, K):  # StreamingLLM: 4 sinks + the most recent tokens
    return _top([float(j) for j in range(len(A))], 8, 4, K)


PRESET_RULES = [
    ("rkv", CompressionConfig.rkv(), rule_rkv),
    ("gkv", CompressionConfig.gkv(observation_window=W), rule_gkv),
    ("snapkv_decode", CompressionConfig.snapkv_decode(observation_window=W), rule_snapkv),
    ("snapkv", CompressionConfig.snapkv(observation_window=W), rule_snapkv),
    ("h2o", CompressionConfig.h2o(observation_window=W), rule_h2o),
    ("streaming_llm", CompressionConfig.streaming_llm(observation_window=W), rule_streaming),
]


@pytest.mark.parametrize("name,cfg,rule", PRESET_RULES, ids=[p[0] for p in PRESET_RULES])
@pytest.mark.parametrize("triton", [False, True], ids=["reference", "triton"])
def test_preset_keeps_what_its_rule_keeps(request, name, cfg, rule, triton):
    if triton:
        request.getfixturevalue("triton_cpu")
    sc = make_scene(MIXED, W=W)
    A, rho = _random_inputs(sc)
    bt, L, H = sc.batch, sc.k.shape[0], sc.k.shape[3]
    if cfg.score == "attention":
        ops = SimpleNamespace(**vars(TRITON_OPS if triton else REFERENCE_OPS))
        ops.attention_score = lambda *a, **kw: A  # random scores in place of the model's
        ops.redundancy = lambda *a, **kw: rho
        F, _ = score_layers(sc.k, sc.q, sc.sc if cfg.use_global_score else None, bt, cfg, ops)
    else:
        F = baseline_scores(bt, cfg, L, H, sc.b, None)
    keep = select_keep(F, bt.num_keep)
    for s, n in enumerate(bt.phys_lens.tolist()):
        nh = int(bt.num_history[s])
        hist_all = gather_positions(sc.sc, bt.block_tables[s], nh) if nh else None
        for l in range(L):
            for h in range(H):
                hist = [] if hist_all is None else hist_all[l, :, h].tolist()
                want = rule(A[l, s, h, :n].tolist(), rho[l, s, h, :n].tolist(), hist,
                            bt.num_keep)
                got = keep[l, s, h, :n].nonzero().flatten().tolist()
                assert got == want, (name, s, l, h)
