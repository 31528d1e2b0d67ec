"""Drive a CausalLM (whole or one rank's share) over a paged KV cache without the engine.

Sequence i owns a contiguous run of blocks. Step 0 prefills every prompt but the last; step 1
mixes decode rows with the last prompt's prefill (both attention paths in one forward); then
every sequence decodes. Greedy: each step feeds back the argmax of the gathered logits.
"""
import torch

from zipage.layers.attention import AttentionMetadata
from zipage.layers.sampler import sample


class PagedRun:
    def __init__(self, model, prompts: list[list[int]], steps: int, block_size: int = 16):
        spec = model.rank_spec  # this rank's KV heads size its cache
        self.model, self.b, self.prompts = model, block_size, prompts
        self.blocks = -(-(max(map(len, prompts)) + steps + 1) // block_size)
        shape = (2, spec.num_layers, len(prompts) * self.blocks, block_size,
                 spec.num_kv_heads, spec.head_dim)
        self.cache = torch.zeros(shape, dtype=next(model.parameters()).dtype,
                                 device=next(model.parameters()).device)
        for i, layer in enumerate(model.model.layers):
            layer.self_attn.k_cache, layer.self_attn.v_cache = self.cache[0, i], self.cache[1, i]
            layer.self_attn.q_cache = None
        self.tokens = [list(p) for p in prompts]

    def _table(self, seq: int) -> list[int]:
        return list(range(seq * self.blocks, (seq + 1) * self.blocks))

    def _slot(self, seq: int, pos: int) -> int:
        return self._table(seq)[pos // self.b] * self.b + pos % self.b

    def forward(self, decode: list[int], prefill: list[int]) -> torch.Tensor:
        """One step: a new token for each `decode` sequence, the whole prompt of each
        `prefill` sequence. Returns the logits (len(decode) + len(prefill), V)."""
        dev = self.cache.device
        ids, pos, slots = [], [], []
        for s in decode:
            p = len(self.tokens[s]) - 1
            ids.append(self.tokens[s][-1]), pos.append(p), slots.append(self._slot(s, p))
        cu = [0]
        for s in prefill:
            n = len(self.tokens[s])
            ids += self.tokens[s]
            pos += range(n)
            slots += [self._slot(s, p) for p in range(n)]
            cu.append(cu[-1] + n)
        i32 = lambda x: torch.tensor(x, dtype=torch.int32, device=dev)  # noqa: E731
        meta = AttentionMetadata(slot_mapping=torch.tensor(slots, device=dev),
                                 num_decode=len(decode))
        if decode:
            meta.decode_block_tables = i32([self._table(s) for s in decode])
            meta.decode_context_lens = i32([len(self.tokens[s]) for s in decode])
        if prefill:
            meta.prefill_block_tables = i32([self._table(s) for s in prefill])
            meta.prefill_cu_seqlens_q = i32(cu)
            meta.prefill_context_lens = i32([len(self.tokens[s]) for s in prefill])
            meta.prefill_max_q_len = max(len(self.tokens[s]) for s in prefill)
        hidden = self.model(torch.tensor(ids, device=dev), torch.tensor(pos, device=dev), meta)
        rows = list(range(len(decode))) + [len(decode) + c - 1 for c in cu[1:]]
        return self.model.logits(hidden[torch.tensor(rows, device=dev)])

    @torch.inference_mode()
    def greedy(self, steps: int) -> dict:
        """{"logits": per step (n, V) on the CPU in sequence order, "tokens": per sequence}."""
        n = len(self.prompts)
        order = [list(range(n - 1)), [n - 1]]  # step 1: decode 0..n-2 + prefill n-1
        logits = [self.forward([], order[0])]
        self._append(order[0], logits[-1])
        step1 = self.forward(order[0], order[1])
        logits.append(step1)
        self._append(order[0] + order[1], step1)
        for _ in range(steps):
            logits.append(self.forward(list(range(n)), []))
            self._append(list(range(n)), logits[-1])
        return {"logits": [x.cpu() for x in logits],
                "tokens": [t[len(p):] for t, p in zip(self.tokens, self.prompts)]}

    def _append(self, seqs: list[int], logits: torch.Tensor) -> None:
        for s, tok in zip(seqs, logits.argmax(-1).tolist()):
            self.tokens[s].append(tok)


def sample_rows(logits: torch.Tensor, seed: int = 3) -> torch.Tensor:
    """Temperature and top-p sampling of every row with fixed per-row seeds."""
    n, dev = logits.shape[0], logits.device
    full = lambda v, dt: torch.full((n,), v, dtype=dt, device=dev)  # noqa: E731
    return sample(logits, full(0.8, torch.float32), full(0, torch.int64), full(0.9, torch.float32),
                  full(0.0, torch.float32), seed + torch.arange(n, device=dev),
                  torch.arange(n, device=dev), all_greedy=False, use_min_p=False,
                  use_top_k_p=True)
