"""Paged KV blocks: free queue, reference counts, prefix caching by chained block hashes.

Pure Python over block ids. Freed blocks keep their hash until they are handed out again,
so a later request with the same prefix can take them back as cache hits.
"""
from collections import OrderedDict

import xxhash

from zipage.engine.sequence import PENDING, Sequence


def chain_hash(prev_hash: int | None, token_ids: list[int]) -> int:
    h = xxhash.xxh64()
    if prev_hash is not None:
        h.update(prev_hash.to_bytes(8, "little"))
    h.update(b"".join(t.to_bytes(4, "little", signed=True) for t in token_ids))
    return h.intdigest()


class Block:
    def __init__(self, block_id: int):
        self.block_id = block_id
        self.ref_count = 0
        self.hash: int | None = None
        self.token_ids: list[int] = []


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int, enable_prefix_caching: bool = True,
                 min_recomputed_tokens: int = 1):
        """min_recomputed_tokens: prompt tokens a cache hit always leaves to compute (1 gives
        logits; with compression, W puts the request's own last W queries in its window)."""
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.min_recomputed_tokens = max(1, min_recomputed_tokens)
        self.blocks = [Block(i) for i in range(num_blocks)]
        self.free_queue: OrderedDict[int, None] = OrderedDict((i, None) for i in range(num_blocks))
        self.hash_to_block: dict[int, int] = {}
        self.num_hit_tokens = 0  # prefix-cache hits, for reports and tests

    @property
    def num_free_blocks(self) -> int:
        return len(self.free_queue)

    def blocks_needed(self, seq: Sequence, num_new_tokens: int) -> int:
        need = -(-(seq.phys_len + num_new_tokens) // self.block_size)
        return max(0, need - len(seq.block_table))

    # -- allocation ---------------------------------------------------------------------
    def _take(self, block_id: int) -> int:
        block = self.blocks[block_id]
        if block.ref_count == 0:
            del self.free_queue[block_id]
        block.ref_count += 1
        return block_id

    def _take_fresh(self) -> int:
        block_id = next(iter(self.free_queue))
        block = self.blocks[block_id]
        if block.hash is not None and self.hash_to_block.get(block.hash) == block_id:
            del self.hash_to_block[block.hash]
        block.hash, block.token_ids = None, []
        return self._take(block_id)

    def _release(self, block_id: int) -> None:
        block = self.blocks[block_id]
        assert block.ref_count > 0, f"double free of block {block_id}"
        block.ref_count -= 1
        if block.ref_count == 0:
            self.free_queue[block_id] = None

    def allocate_prefix(self, seq: Sequence) -> int:
        """Give a new request its cached prefix blocks; returns the number of hit tokens.

        At least `min_recomputed_tokens` prompt tokens are always left to compute.
        """
        assert not seq.block_table and seq.num_computed == 0
        if not self.enable_prefix_caching:
            return 0
        b, prev, hits = self.block_size, None, []
        for i in range(max(0, len(seq) - self.min_recomputed_tokens) // b):
            tokens = seq.token_ids[i * b:(i + 1) * b]
            prev = chain_hash(prev, tokens)
            block_id = self.hash_to_block.get(prev)
            if block_id is None or self.blocks[block_id].token_ids != tokens:
                break
            hits.append(block_id)
        seq.block_table = [self._take(i) for i in hits]
        seq.num_computed = len(hits) * b
        self.num_hit_tokens += seq.num_computed
        return seq.num_computed

    def can_append(self, seq: Sequence, num_new_tokens: int) -> bool:
        return self.blocks_needed(seq, num_new_tokens) <= self.num_free_blocks

    def append_slots(self, seq: Sequence, num_new_tokens: int) -> None:
        for _ in range(self.blocks_needed(seq, num_new_tokens)):
            seq.block_table.append(self._take_fresh())

    def free(self, seq: Sequence) -> None:
        # Reverse order: the prefix head is queued last, so it stays cached longest.
        for block_id in reversed(seq.block_table):
            self._release(block_id)
        seq.block_table = []

    def release_blocks(self, block_ids: list[int]) -> None:
        for block_id in block_ids:
            self._release(block_id)

    # -- prefix hashing -------------------------------------------------------------------
    def register_full_blocks(self, seq: Sequence, num_tokens: int) -> None:
        """Hash the blocks full within the first ``num_tokens`` tokens.

        Called when a step is scheduled: a block computed in this step can already be hit by
        a request admitted in the same step (every layer writes K/V before attending), which
        is how the ``n`` samples of a prompt share its blocks. Only uncompressed requests
        hash: their blocks hold exactly the logical tokens.
        """
        if not self.enable_prefix_caching or seq.num_evicted:
            return
        b = self.block_size
        # Blocks full before this step were hashed when their step was scheduled: start after
        # them (a per-step hot path), unless the chain has a gap.
        start = min(seq.num_computed, num_tokens) // b
        prev = self.blocks[seq.block_table[start - 1]].hash if start else None
        if prev is None:
            start = 0
        for i in range(start, num_tokens // b):
            block = self.blocks[seq.block_table[i]]
            tokens = seq.token_ids[i * b:(i + 1) * b]
            if PENDING in tokens:  # a token still being sampled (async scheduling): hash later
                return
            if block.hash is None:
                block.hash = chain_hash(prev, tokens)
                block.token_ids = tokens
                self.hash_to_block.setdefault(block.hash, block.block_id)
            prev = block.hash

    # -- compression ----------------------------------------------------------------------
    def plan_compression(self, seq: Sequence, num_kept_blocks: int) -> tuple[list[int], list[int]] | None:
        """Target table (``num_kept_blocks + 1`` blocks) and blocks to release afterwards.

        Private blocks are rewritten in place (their hash is dropped: content changes);
        shared blocks (prefix cache) are never written, a fresh block replaces each of them.
        Returns None when there are not enough free blocks for those replacements.
        """
        table = seq.block_table
        cap = num_kept_blocks + 1
        assert len(table) >= cap
        shared = [i for i in range(cap) if self.blocks[table[i]].ref_count > 1]
        if len(shared) > self.num_free_blocks:
            return None
        target = list(table[:cap])
        for i in range(cap):
            if i in shared:
                target[i] = self._take_fresh()
            else:
                block = self.blocks[table[i]]
                if block.hash is not None and self.hash_to_block.get(block.hash) == block.block_id:
                    del self.hash_to_block[block.hash]
                block.hash, block.token_ids = None, []
        release = [table[i] for i in shared] + table[cap:]
        return target, release
