"""Paged KV blocks: free queue, reference counts, prefix caching by chained block hashes.

Pure Python over block ids. Freed blocks keep their hash until they are handed out again,
so a later request with the same prefix can take them back as cache hits.
"""
import sys
from array import array
from collections import OrderedDict

import xxhash

from zipage.engine.sequence import Sequence


def chain_hash(prev_hash: int | None, token_ids: list[int]) -> int:
    h = xxhash.xxh64()
    if prev_hash is not None:
        h.update(prev_hash.to_bytes(8, "little"))
    tokens = array("i", token_ids)  # int32 in one buffer: a bytes object per token was slow
    if sys.byteorder != "little":
        tokens.byteswap()
    h.update(tokens)
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
        """min_recomputed_tokens: tokens a cache hit always leaves to compute (1 gives logits;
        with compression, W + 1 puts the request's own queries in its observation window)."""
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.min_recomputed_tokens = max(1, min_recomputed_tokens)
        self.blocks = [Block(i) for i in range(num_blocks)]
        self.free_queue: OrderedDict[int, None] = OrderedDict((i, None) for i in range(num_blocks))
        self.hash_to_block: dict[int, int] = {}
        self.num_hit_tokens = 0  # prefix-cache hits, for reports and tests

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    @property
    def num_free_blocks(self) -> int:
        return len(self.free_queue)

    def blocks_needed(self, seq: Sequence, num_new_tokens: int) -> int:
        need = -(-(seq.phys_len + num_new_tokens) // self.block_size)
        return max(0, need - len(seq.block_table))

    # -- allocation ---------------------------------------------------------------------
    def find_cached_prefix(self, seq: Sequence) -> list[int]:
        """Cached blocks holding the request's leading tokens (a lookup: nothing is taken).

        At least `min_recomputed_tokens` of the tokens to compute are always left out.
        """
        if not self.enable_prefix_caching:
            return []
        b, prev, hits = self.block_size, None, []
        for i in range(max(0, seq.compute_target - self.min_recomputed_tokens) // b):
            tokens = seq.token_ids[i * b:(i + 1) * b]
            prev = chain_hash(prev, tokens)
            block_id = self.hash_to_block.get(prev)
            if block_id is None or self.blocks[block_id].token_ids != tokens:
                break
            hits.append(block_id)
        return hits

    def allocate_slots(self, seq: Sequence, num_new_tokens: int,
                       cached_blocks: list[int] = ()) -> bool:
        """Room for ``num_new_tokens`` more tokens of ``seq``, in one call: check, take the
        cached prefix blocks (a new request) and fresh blocks, and hash the blocks that this
        step fills. Returns False, changing nothing, when the pool is short."""
        b, num_cached = self.block_size, len(cached_blocks) * self.block_size
        end = seq.num_computed - seq.num_evicted + num_cached + num_new_tokens
        need = max(0, (end + b - 1) // b - len(seq.block_table) - len(cached_blocks))
        if cached_blocks:
            reclaimed = sum(self.blocks[i].ref_count == 0 for i in cached_blocks)  # cached, free
            if need + reclaimed > len(self.free_queue):
                return False
            assert not seq.block_table and seq.num_computed == 0
            seq.block_table = [self._take(i) for i in cached_blocks]
            seq.num_computed = num_cached
            self.num_hit_tokens += num_cached
        elif need > len(self.free_queue):
            return False
        if need:  # a new list: steps already scheduled keep the table they were given
            seq.block_table = seq.block_table + [self._take_fresh() for _ in range(need)]
        self._cache_full_blocks(seq, seq.num_computed + num_new_tokens)
        return True

    def _take(self, block_id: int) -> int:
        block = self.blocks[block_id]
        if block.ref_count == 0:
            del self.free_queue[block_id]
        block.ref_count += 1
        return block_id

    def _take_fresh(self) -> int:
        block_id = next(iter(self.free_queue))
        self._forget_hash(self.blocks[block_id])
        return self._take(block_id)

    def _forget_hash(self, block: Block) -> None:
        if block.hash is not None and self.hash_to_block.get(block.hash) == block.block_id:
            del self.hash_to_block[block.hash]
        block.hash, block.token_ids = None, []

    def _release(self, block_id: int) -> None:
        block = self.blocks[block_id]
        assert block.ref_count > 0, f"double free of block {block_id}"
        block.ref_count -= 1
        if block.ref_count == 0:
            self.free_queue[block_id] = None

    def free(self, seq: Sequence) -> None:
        # Reverse order: the prefix head is queued last, so it stays cached longest.
        for block_id in reversed(seq.block_table):
            self._release(block_id)
        seq.block_table = []

    def release_blocks(self, block_ids: list[int]) -> None:
        for block_id in block_ids:
            self._release(block_id)

    def reset(self) -> None:
        """Every block free and uncached (after an aborted run: the KV of its last steps may
        be half written, so no cached hash can be trusted)."""
        for block in self.blocks:
            block.ref_count, block.hash, block.token_ids = 0, None, []
        self.free_queue = OrderedDict((b.block_id, None) for b in self.blocks)
        self.hash_to_block.clear()

    # -- prefix hashing -------------------------------------------------------------------
    def _cache_full_blocks(self, seq: Sequence, num_tokens: int) -> None:
        """Hash the blocks full within the first ``num_tokens`` tokens.

        Done when a step is scheduled: a block computed in this step can already be hit by
        a request admitted in the same step (every layer writes K/V before attending), which
        is how the ``n`` samples of a prompt share its blocks. Only uncompressed requests
        hash: their blocks hold exactly the logical tokens. A block whose last token is still
        being sampled (asynchronous scheduling) is hashed at a later step.
        """
        if not self.enable_prefix_caching or seq.num_evicted:
            return
        b = self.block_size
        num_tokens = min(num_tokens, len(seq.token_ids))  # known ids only
        # Blocks full before this step were hashed when their step was scheduled: start after
        # them (a per-step hot path), unless the chain has a gap.
        start = min(seq.num_computed, num_tokens) // b
        prev = self.blocks[seq.block_table[start - 1]].hash if start else None
        if prev is None:
            start = 0
        for i in range(start, num_tokens // b):
            block = self.blocks[seq.block_table[i]]
            if block.hash is None:
                tokens = seq.token_ids[i * b:(i + 1) * b]
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
                self._forget_hash(self.blocks[table[i]])
        release = [table[i] for i in shared] + table[cap:]
        return target, release
