"""Score and compact a batch of requests, layer chunk by layer chunk (docs/method.md §7).

Per chunk of layers: attention score -> (redundancy) -> final score (global score, pooling,
mix, forced keeps) -> top-K mask -> compaction of K, V and the global score. Transient memory
is a few float32 (layer_chunk, B, H_kv, n_max * b) tensors: no (W, n) logits are kept.
"""
import time
from contextlib import contextmanager
from types import SimpleNamespace

import torch

from zipage.compression.batch import CompressionBatch
from zipage.compression.config import CompressionConfig
from zipage.kernels._dispatch import use_triton
from zipage.kernels.attention_score import attention_score, attention_score_reference
from zipage.kernels.compact_kv import compact, compact_reference
from zipage.kernels.eviction_score import final_score, final_score_reference, select_keep
from zipage.kernels.key_redundancy import redundancy, redundancy_reference

TRITON_OPS = SimpleNamespace(attention_score=attention_score, redundancy=redundancy,
                             final_score=final_score, compact=compact)
REFERENCE_OPS = SimpleNamespace(attention_score=attention_score_reference,
                                redundancy=redundancy_reference,
                                final_score=final_score_reference, compact=compact_reference)


class _Timer:
    """Per-stage wall time in ms (CUDA events on GPU, summed after one final sync)."""

    def __init__(self, enabled: bool, device: torch.device):
        self.enabled, self.cuda = enabled, device.type == "cuda"
        self.events: dict[str, list] = {}

    @contextmanager
    def __call__(self, name: str):
        if not self.enabled:
            yield
            return
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            yield
            end.record()
            self.events.setdefault(name, []).append((start, end))
        else:
            t0 = time.perf_counter()
            yield
            self.events.setdefault(name, []).append((time.perf_counter() - t0) * 1e3)

    def result(self) -> dict[str, float]:
        if not self.enabled:
            return {}
        if self.cuda:
            torch.cuda.current_stream().synchronize()
            return {k: sum(s.elapsed_time(e) for s, e in v) for k, v in self.events.items()}
        return {k: sum(v) for k, v in self.events.items()}


def score_layers(k, query, score, batch: CompressionBatch, cfg: CompressionConfig, ops=None,
                 timer=None, k_scale=None):
    """Eviction scores of one layer chunk: (F, S) float32 (L', B, H_kv, n_max * b).

    k: (L', NB, b, H_kv, D); query: (L', M, W, H_q, D); score: (L', NB, b, H_kv) or None;
    k_scale: (L', NB, b, H_kv) scales of an fp8 k (zipage/kernels/fp8.py) or None.
    S (the updated global score) is None unless cfg.use_global_score.
    """
    ops = ops or (TRITON_OPS if use_triton(k) else REFERENCE_OPS)
    timer = timer or _Timer(False, k.device)
    with timer("attention_score"):
        A = ops.attention_score(k, query, batch.slots, batch.block_tables, batch.phys_lens,
                                batch.window_pos, k_scale=k_scale)
    rho = None
    if cfg.redundancy != "none":
        with timer("redundancy"):
            rho = ops.redundancy(k, batch.block_tables, batch.phys_lens,
                                 cfg.redundancy == "lightning", cfg.redundancy_threshold,
                                 unit_dtype=query.dtype)
    with timer("final_score"):
        return ops.final_score(
            A, rho, score if cfg.use_global_score else None, batch.block_tables,
            batch.phys_lens, batch.num_history, window=cfg.forced_recent(batch.num_keep),
            num_sink=cfg.num_sink_tokens, decay=cfg.global_decay,
            pooling_kernel_size=cfg.pooling_size,
            pool_every_compression=cfg.pool_every_compression, redundancy_mode=cfg.redundancy,
            redundancy_weight=cfg.redundancy_weight, temperature=cfg.redundancy_temperature,
            global_mode=cfg.global_mode, pooling_mode=cfg.pooling_mode,
            normalization=cfg.score_normalization)


def baseline_scores(batch: CompressionBatch, cfg: CompressionConfig, num_layers: int,
                    num_kv_heads: int, block_size: int, generator: torch.Generator | None):
    """F (L', B, H_kv, n_max * b) for the "recent" and "random" baselines (no model signal)."""
    B, n_max = batch.block_tables.shape
    dev = batch.phys_lens.device
    pos = torch.arange(n_max * block_size, device=dev, dtype=torch.float32)
    shape = (num_layers, B, num_kv_heads, pos.numel())
    if cfg.score == "recent":
        F = pos.expand(shape).clone()
    else:
        F = torch.rand(shape, generator=generator, device="cpu").to(dev)
    n = batch.phys_lens.long()[None, :, None, None]
    F = F.masked_fill(pos >= n - cfg.forced_recent(batch.num_keep), float("inf"))
    F = F.masked_fill(pos < cfg.num_sink_tokens, float("inf"))
    return F.masked_fill(pos >= n, float("-inf"))


def compress_batch(k_cache, v_cache, query_cache, score_cache, batch: CompressionBatch,
                   cfg: CompressionConfig, layer_chunk: int = 8, profile: bool = False,
                   ops=None, generator: torch.Generator | None = None, k_scale=None,
                   v_scale=None) -> dict[str, float]:
    """Compress every request of `batch` to batch.num_keep tokens per (layer, KV head), in place.

    k_cache, v_cache: (L, NB, b, H_kv, D) (post-RoPE keys); query_cache: (L, M, W, H_q, D);
    score_cache: (L, NB, b, H_kv) global-score cache, required iff cfg.use_global_score
    (written at the target slots of the kept tokens); k_scale, v_scale: (L, NB, b, H_kv)
    scales of an fp8 cache (zipage/kernels/fp8.py), moved with their tokens. The caller
    releases surplus blocks after this returns (and after a stream sync on a side stream).
    ops: TRITON_OPS / REFERENCE_OPS; default by device (Triton on CUDA or TRITON_INTERPRET=1).
    Returns per-stage times in ms when profile=True (one device sync), else {}.
    """
    L, NB, b, H, D = k_cache.shape
    if query_cache.shape[2] != cfg.observation_window:
        raise ValueError("query_cache window differs from cfg.observation_window")
    if cfg.use_global_score and score_cache is None:
        raise ValueError("use_global_score needs a score_cache")
    if layer_chunk < 1:
        raise ValueError("layer_chunk must be >= 1")
    batch.check(b, cfg.observation_window)
    if batch.size == 0:
        return {}
    ops = ops or (TRITON_OPS if use_triton(k_cache) else REFERENCE_OPS)
    timer = _Timer(profile, k_cache.device)
    if cfg.score != "attention" and cfg.use_global_score:
        raise ValueError("the recent/random baselines do not use the global score")
    with timer("total"):
        for l0 in range(0, L, layer_chunk):
            sl = slice(l0, min(l0 + layer_chunk, L))
            sc = score_cache[sl] if cfg.use_global_score else None
            if cfg.score == "attention":
                F, S = score_layers(k_cache[sl], query_cache[sl], sc, batch, cfg, ops, timer,
                                    None if k_scale is None else k_scale[sl])
            else:
                F = baseline_scores(batch, cfg, sl.stop - sl.start, H, b, generator)
                S = None
            with timer("topk"):
                keep = select_keep(F, batch.num_keep)
            with timer("compact"):
                scales = {} if k_scale is None else dict(k_scale=k_scale[sl],
                                                         v_scale=v_scale[sl])
                ops.compact(k_cache[sl], v_cache[sl], keep, batch.block_tables,
                            batch.target_tables, batch.phys_lens, S, sc, **scales)
    return timer.result()
