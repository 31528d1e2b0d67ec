"""CUDA graphs for decode steps: one graph per padded batch size, sharing static inputs."""
import weakref

import torch

from zipage.layers.attention import AttentionMetadata
from zipage.worker.batch import Batch, pad_tables
from zipage.worker.staging import StagingRing


def _capture_sizes(max_batch: int) -> list[int]:
    sizes = [1, 2, 4, 8] + list(range(16, max_batch + 1, 16))
    return sorted({s for s in sizes if s <= max_batch} | {max_batch})


class DecodeGraphs:
    def __init__(self, runner, max_batch: int, table_width: int):
        self.runner, self.width = weakref.proxy(runner), table_width  # no reference cycle
        dev = runner.device
        # Static inputs: rows ids, positions, slots, query slots (int64); lens, tables (int32).
        self.vectors = torch.zeros(4, max_batch, dtype=torch.int64, device=dev)
        self.ids, self.pos, self.slots, self.qslots = self.vectors
        self.lens = torch.zeros(max_batch, dtype=torch.int32, device=dev)
        self.tables = torch.full((max_batch, table_width), -1, dtype=torch.int32, device=dev)
        # Pinned host staging: three copies per step instead of one per input. Two sets, used
        # in turn, each rewritten only once its previous copies have run (staging.py).
        self.staging = StagingRing(lambda: (
            torch.zeros(4, max_batch, dtype=torch.int64).pin_memory(),
            torch.zeros(max_batch, dtype=torch.int32).pin_memory(),
            torch.zeros(max_batch, table_width, dtype=torch.int32).pin_memory()))
        self.sizes = _capture_sizes(max_batch)
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.outputs: dict[int, torch.Tensor] = {}
        self.pool = None
        self._capture_all()

    def fits(self, n: int) -> bool:
        return n <= self.sizes[-1]

    def _meta(self, bs: int) -> AttentionMetadata:
        with_q = self.runner.query_cache is not None
        return AttentionMetadata(slot_mapping=self.slots[:bs], num_decode=bs,
                                 decode_block_tables=self.tables[:bs],
                                 decode_context_lens=self.lens[:bs],
                                 query_slot_mapping=self.qslots[:bs] if with_q else None)

    @torch.inference_mode()
    def _capture_all(self):
        model = self.runner.model
        for bs in reversed(self.sizes):  # largest first: smaller graphs reuse its pool
            model(self.ids[:bs], self.pos[:bs], self._meta(bs))  # warm up kernels
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self.pool):
                self.outputs[bs] = model(self.ids[:bs], self.pos[:bs], self._meta(bs))
            if self.pool is None:
                self.pool = graph.pool()
            self.graphs[bs] = graph
        torch.cuda.synchronize()

    def run(self, batch: Batch, pending=None) -> torch.Tensor:
        """pending: (rows, tokens) device tensors for input ids still being sampled."""
        n = len(batch.input_ids)
        bs = next(s for s in self.sizes if s >= n)
        host_vectors, host_lens, host_tables = self.staging.take()
        vec = host_vectors.numpy()
        vec[:, n:bs] = [[0], [0], [-1], [-1]]  # padded rows write nothing and attend to nothing
        vec[0, :n], vec[1, :n] = batch.input_ids, batch.positions
        vec[2, :n], vec[3, :n] = batch.slots, batch.query_slots
        lens = host_lens.numpy()
        lens[:n], lens[n:bs] = batch.decode_context_lens, 0
        pad_tables(batch.decode_tables, self.width, out=host_tables.numpy()[:bs])
        self.vectors[:, :bs].copy_(host_vectors[:, :bs], non_blocking=True)
        self.lens[:bs].copy_(host_lens[:bs], non_blocking=True)
        self.tables[:bs].copy_(host_tables[:bs], non_blocking=True)
        self.staging.queued(torch.cuda.current_stream(self.tables.device))  # the copies' stream
        if pending is not None:
            self.ids[pending[0]] = pending[1]
        self.graphs[bs].replay()
        return self.outputs[bs][:n]
