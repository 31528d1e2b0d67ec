"""Builds device tensors for the compression tasks of a step and runs the pipeline."""
import weakref

import numpy as np
import torch

from zipage.compression import CompressionBatch, compress_batch
from zipage.engine.messages import CompressionTask
from zipage.worker.batch import pad_tables, to_device


def window_positions(num_computed: int, phys_len: int, window: int) -> list[int]:
    """Physical index of the token whose query sits at ring index w (w = t % W)."""
    first = num_computed - window
    logical = [first + (w - first) % window for w in range(window)]
    return [t - num_computed + phys_len for t in logical]


class Compressor:
    def __init__(self, cfg, runner):
        self.cfg, self.runner = cfg, weakref.proxy(runner)  # no reference cycle
        self.num_keep = cfg.budget
        self.stage_ms: dict[str, float] = {}  # summed per stage (profile_compression)
        self.round_ms: list[tuple[int, float]] = []  # (batch size, total ms) per call
        self.generator = torch.Generator().manual_seed(cfg.seed)  # "random" baseline only
        # Scoring allocates ~5 float32 (layer_chunk, B, H_kv, n_max * b) tensors per call; a
        # step compressing many long requests is split so they stay under this size.
        self.max_transient_bytes = 1 << 30

    def build_batch(self, tasks: list[CompressionTask]) -> CompressionBatch:
        W = self.cfg.observation_window
        dev = self.runner.device

        def i32(rows):
            return to_device(rows, np.int32, dev)

        return CompressionBatch(
            slots=i32([t.query_slot for t in tasks]),
            block_tables=i32(pad_tables([t.old_table for t in tasks])),
            target_tables=i32([t.target_table for t in tasks]),
            phys_lens=i32([t.phys_len for t in tasks]),
            window_pos=i32([window_positions(t.num_computed, t.phys_len, W) for t in tasks]),
            num_history=i32([self.num_keep if t.has_history else 0 for t in tasks]),
            num_keep=self.num_keep)

    def groups(self, tasks: list[CompressionTask]) -> list[list[CompressionTask]]:
        """Tasks split (longest tables together) so each call's transient memory fits."""
        per_token = 5 * 4 * self.cfg.compress_layer_chunk * self.runner.spec.num_kv_heads
        out, group = [], []
        for task in sorted(tasks, key=lambda t: len(t.old_table), reverse=True):
            width = len(group[0].old_table) if group else len(task.old_table)
            if group and (len(group) + 1) * width * self.cfg.block_size * per_token > \
                    self.max_transient_bytes:
                out.append(group)
                group = []
            group.append(task)
        return out + [group] if group else out

    def run(self, tasks: list[CompressionTask]) -> None:
        r = self.runner
        scales = {} if r.kv_scale is None else dict(k_scale=r.kv_scale[0], v_scale=r.kv_scale[1])
        for group in self.groups(tasks):
            times = compress_batch(r.k_cache, r.v_cache, r.query_cache, r.score_cache,
                                   self.build_batch(group), self.cfg.compression,
                                   layer_chunk=self.cfg.compress_layer_chunk,
                                   profile=self.cfg.profile_compression, generator=self.generator,
                                   **scales)
            for name, ms in times.items():
                self.stage_ms[name] = self.stage_ms.get(name, 0.0) + ms
            if times:
                self.round_ms.append((len(group), times["total"]))
