"""CUDA graphs for decode steps: one graph per padded batch size, sharing static inputs."""
import torch

from zipage.layers.attention import AttentionMetadata
from zipage.runner.batch import Batch


def _capture_sizes(max_batch: int) -> list[int]:
    sizes = [1, 2, 4, 8] + list(range(16, max_batch + 1, 16))
    return sorted({s for s in sizes if s <= max_batch} | {max_batch})


class DecodeGraphs:
    def __init__(self, runner, max_batch: int, table_width: int):
        self.runner, self.width = runner, table_width
        dev = runner.device
        self.ids = torch.zeros(max_batch, dtype=torch.int64, device=dev)
        self.pos = torch.zeros(max_batch, dtype=torch.int64, device=dev)
        self.slots = torch.full((max_batch,), -1, dtype=torch.int64, device=dev)
        self.qslots = torch.full((max_batch,), -1, dtype=torch.int64, device=dev)
        self.tables = torch.full((max_batch, table_width), -1, dtype=torch.int32, device=dev)
        self.lens = torch.zeros(max_batch, dtype=torch.int32, device=dev)
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

    def run(self, batch: Batch) -> torch.Tensor:
        n = len(batch.input_ids)
        bs = next(s for s in self.sizes if s >= n)
        dev = self.runner.device
        self.ids[:n] = torch.tensor(batch.input_ids, device=dev)
        self.pos[:n] = torch.tensor(batch.positions, device=dev)
        self.slots[:bs] = -1
        self.slots[:n] = torch.tensor(batch.slots, device=dev)
        self.qslots[:bs] = -1
        self.qslots[:n] = torch.tensor(batch.query_slots, device=dev)
        self.lens[:bs] = 0
        self.lens[:n] = torch.tensor(batch.decode_context_lens, dtype=torch.int32, device=dev)
        tables = [t + [-1] * (self.width - len(t)) for t in batch.decode_tables]
        self.tables[:n] = torch.tensor(tables, dtype=torch.int32, device=dev)
        self.graphs[bs].replay()
        return self.outputs[bs][:n]
