"""The requests compressed together in one step (device tensors built by the runner)."""
from dataclasses import dataclass

import torch


@dataclass
class CompressionBatch:
    """B requests to compress; every tensor lives on the cache's device.

    slots:         int32 (B,) query slot of each request (row of query_cache)
    block_tables:  int32 (B, n_max) current tables, -1 padded
    target_tables: int32 (B, C + 1) where kept tokens go; each block i < C (those that
                   receive tokens) is either block_tables[s, i] (reused in place) or a
                   fresh block that no request of the batch reads (shared prefix)
    phys_lens:     int32 (B,) valid physical tokens (>= num_keep + 1)
    window_pos:    int32 (B, W) physical index of the token whose query is at ring index w;
                   these are the last W physical tokens of the request
    num_history:   int32 (B,) leading slots with a valid global score (0 or C * b)
    num_keep:      K = C * b tokens kept per (layer, request, KV head)
    """

    slots: torch.Tensor
    block_tables: torch.Tensor
    target_tables: torch.Tensor
    phys_lens: torch.Tensor
    window_pos: torch.Tensor
    num_history: torch.Tensor
    num_keep: int

    @property
    def size(self) -> int:
        return self.block_tables.shape[0]

    def check(self, block_size: int, window: int) -> None:
        """Shapes and dtypes (no device sync). Raises ValueError."""
        B = self.size
        shapes = dict(slots=(B,), phys_lens=(B,), num_history=(B,), window_pos=(B, window))
        for name, shape in shapes.items():
            t = getattr(self, name)
            if tuple(t.shape) != shape:
                raise ValueError(f"{name} must have shape {shape}, got {tuple(t.shape)}")
        for name in ("slots", "block_tables", "target_tables", "phys_lens", "window_pos",
                     "num_history"):
            if getattr(self, name).dtype != torch.int32:
                raise ValueError(f"{name} must be int32")
        if self.target_tables.shape[0] != B or self.target_tables.shape[1] * block_size < \
                self.num_keep:
            raise ValueError("target_tables must be (B, >= num_keep / block_size)")
        if self.num_keep < window:
            raise ValueError("num_keep must be >= the observation window")

    def check_values(self, block_size: int, window: int, num_sink: int = 0) -> None:
        """Value checks (syncs the device: tests and debugging only). Raises ValueError."""
        self.check(block_size, window)
        n = self.phys_lens.long()
        if bool((n <= self.num_keep).any()):
            raise ValueError("every request must hold more than num_keep tokens")
        if num_sink + window > self.num_keep:
            raise ValueError("sinks + window exceed num_keep")
        if bool((n > self.block_tables.shape[1] * block_size).any()):
            raise ValueError("phys_lens exceed the block tables")
        tables, targets = self.block_tables.tolist(), self.target_tables.tolist()
        sources = {blk for row in tables for blk in row if blk >= 0}
        written = -(-self.num_keep // block_size)  # target blocks receiving kept tokens
        for src, tgt in zip(tables, targets):  # the in-place safety condition of compaction
            if any(t != (src[i] if i < len(src) else -1) and t in sources
                   for i, t in enumerate(tgt[:written])):
                raise ValueError("target block i must be source block i or a fresh block")
        w = torch.arange(window, device=n.device)
        expected = torch.sort(self.window_pos.long(), dim=1).values
        if not torch.equal(expected, n[:, None] - window + w[None, :]):
            raise ValueError("window_pos must hold the last W physical positions")
