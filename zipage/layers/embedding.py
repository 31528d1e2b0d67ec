"""Token embedding and LM head with the vocabulary split over ranks.

Rank r holds rows [r*R, (r+1)*R) of the vocabulary, R = ceil(V/N); rows past V are zero.
The embedding looks up the tokens it holds, writes zeros for the others, and one all-reduce
adds the ranks' rows (exact: one non-zero term per element). The LM head computes the logits
of its rows and all-gathers them, so every rank holds the full (T, V) logits: every rank then
samples the same tokens (the sampler is a pure function of logits, seeds and positions) and
has the next step's input ids on its own device without a broadcast.
"""
import torch
from torch import nn
import torch.nn.functional as F

from zipage.distributed.group import SINGLE, TPGroup
from zipage.layers.linear import shard_size, sharded


class VocabParallelEmbedding(nn.Module):
    def __init__(self, vocab_size: int, dim: int, tp: TPGroup = SINGLE):
        super().__init__()
        self.tp, self.rows = tp, shard_size(vocab_size, tp)
        self.first = tp.rank * self.rows
        self.weight = sharded(torch.empty(self.rows, dim), 0, [vocab_size])

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """ids (T,) int64 -> (T, dim)."""
        if self.tp.size == 1:
            return F.embedding(ids, self.weight)
        local = ids - self.first
        held = (local >= 0) & (local < self.rows)
        out = F.embedding(local.masked_fill(~held, 0), self.weight)
        return self.tp.all_reduce(out.masked_fill_(~held.unsqueeze(1), 0))


class ParallelLMHead(nn.Module):
    def __init__(self, vocab_size: int, dim: int, tp: TPGroup = SINGLE,
                 tied: VocabParallelEmbedding | None = None):
        super().__init__()
        self.tp, self.vocab_size = tp, vocab_size
        self.weight = tied.weight if tied is not None else \
            sharded(torch.empty(shard_size(vocab_size, tp), dim), 0, [vocab_size])

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden (T, dim) -> logits (T, V) float32, the same on every rank."""
        logits = F.linear(hidden, self.weight)
        if self.tp.size == 1:
            return logits.float()
        parts = self.tp.all_gather(logits)  # (N, T, R)
        t = hidden.shape[0]
        return parts.permute(1, 0, 2).reshape(t, -1)[:, :self.vocab_size].float()
