"""BlockManager bookkeeping with exact block ids, ref counts and free-queue order."""
from zipage.engine.block_manager import BlockManager
from zipage.engine.sequence import Sequence
from zipage.sampling_params import SamplingParams

B = 4


def make_seq(tokens):
    return Sequence(tokens, SamplingParams(max_tokens=8), block_size=B)


def grow(bm, seq, n):
    """Allocate and mark ``n`` more tokens as computed (what a scheduled step does)."""
    assert bm.allocate_slots(seq, n)
    seq.num_computed += n


def take_prefix(bm, seq):
    """Admit a new request with its cached prefix (nothing new to compute yet): hit tokens."""
    assert bm.allocate_slots(seq, 0, bm.find_cached_prefix(seq))
    return seq.num_computed


def test_allocation_takes_blocks_in_free_queue_order():
    bm = BlockManager(num_blocks=6, block_size=B)
    seq = make_seq(list(range(10)))
    assert bm.blocks_needed(seq, 10) == 3
    grow(bm, seq, 10)
    assert seq.block_table == [0, 1, 2]
    assert [bm.blocks[i].ref_count for i in range(6)] == [1, 1, 1, 0, 0, 0]
    assert list(bm.free_queue) == [3, 4, 5]


def test_free_returns_blocks_in_reverse_order_and_keeps_hashes():
    bm = BlockManager(num_blocks=6, block_size=B)
    seq = make_seq(list(range(10)))
    grow(bm, seq, 10)
    bm.free(seq)
    assert list(bm.free_queue) == [3, 4, 5, 2, 1, 0]
    assert bm.blocks[0].hash is not None and bm.blocks[1].hash is not None
    assert bm.blocks[2].hash is None  # partial block: never hashed


def test_prefix_hit_shares_full_blocks_and_leaves_one_token_to_compute():
    bm = BlockManager(num_blocks=8, block_size=B)
    first = make_seq(list(range(9)))
    grow(bm, first, 9)
    second = make_seq(list(range(8)) + [99, 98])
    assert take_prefix(bm, second) == 8
    assert second.block_table == [0, 1]
    assert bm.blocks[0].ref_count == 2 and bm.blocks[1].ref_count == 2
    # A prompt that is entirely cached still computes its last block (it needs logits).
    third = make_seq(list(range(8)))
    assert take_prefix(bm, third) == 4
    assert third.block_table == [0]
    assert bm.blocks[0].ref_count == 3


def test_hits_leave_the_window_to_compute_when_compressing():
    """With compression (W = 5 here) a hit never covers the last 5 prompt tokens."""
    bm = BlockManager(num_blocks=10, block_size=B, min_recomputed_tokens=5)
    first = make_seq(list(range(13)))
    grow(bm, first, 13)  # blocks 0-2 full and hashed
    second = make_seq(list(range(13)))
    assert take_prefix(bm, second) == 8  # 13 - 5 = 8 tokens: blocks 0 and 1 only
    assert second.block_table == first.block_table[:2]
    third = make_seq(list(range(12)))
    assert take_prefix(bm, third) == 4  # 12 - 5 = 7 tokens: one whole block


def test_hit_on_a_freed_cached_block_takes_it_back_from_the_free_queue():
    bm = BlockManager(num_blocks=4, block_size=B)
    first = make_seq(list(range(8)) + [7])
    grow(bm, first, 9)
    bm.free(first)
    assert list(bm.free_queue) == [3, 2, 1, 0]
    again = make_seq(list(range(8)) + [5])
    assert take_prefix(bm, again) == 8
    assert again.block_table == [0, 1]
    assert list(bm.free_queue) == [3, 2]


def test_reused_free_block_loses_its_hash():
    bm = BlockManager(num_blocks=2, block_size=B)
    first = make_seq([1, 2, 3, 4, 5])
    grow(bm, first, 5)
    bm.free(first)  # queue: [1, 0]; block 0 holds hash of [1,2,3,4]
    other = make_seq([9, 9, 9, 9, 9, 9, 9, 9, 9])
    grow(bm, other, 8)
    assert other.block_table == [1, 0]
    assert bm.find_cached_prefix(make_seq([1, 2, 3, 4, 5])) == []


def test_no_prefix_caching_means_no_hits():
    bm = BlockManager(num_blocks=8, block_size=B, enable_prefix_caching=False)
    first = make_seq(list(range(9)))
    grow(bm, first, 9)
    assert bm.find_cached_prefix(make_seq(list(range(9)))) == []


def test_compression_plan_in_place_and_with_shared_prefix():
    bm = BlockManager(num_blocks=12, block_size=B)
    owner = make_seq(list(range(13)))
    grow(bm, owner, 13)  # blocks [0..3], 3 full hashed blocks
    sharer = make_seq(list(range(8)) + [50] * 9)
    assert take_prefix(bm, sharer) == 8  # shares blocks 0, 1
    grow(bm, sharer, 9)
    assert sharer.block_table == [0, 1, 4, 5, 6]
    target, release = bm.plan_compression(sharer, num_kept_blocks=2)
    # Shared blocks 0 and 1 are replaced by fresh ones; block 4 is rewritten in place.
    assert target == [7, 8, 4]
    assert release == [0, 1, 5, 6]
    assert bm.blocks[4].hash is None
    bm.release_blocks(release)
    assert bm.blocks[0].ref_count == 1 and bm.blocks[1].ref_count == 1
    assert list(bm.free_queue) == [9, 10, 11, 5, 6]
    # An unshared request compresses fully in place.
    target, release = bm.plan_compression(owner, num_kept_blocks=2)
    assert target == [0, 1, 2] and release == [3]


def test_compression_plan_fails_without_free_blocks_for_shared_prefix():
    bm = BlockManager(num_blocks=5, block_size=B)
    owner = make_seq(list(range(9)))
    grow(bm, owner, 9)
    sharer = make_seq(list(range(8)) + [1, 1, 1, 1])
    assert bm.allocate_slots(sharer, 4, bm.find_cached_prefix(sharer))
    sharer.num_computed += 4
    assert bm.num_free_blocks == 1
    assert bm.plan_compression(sharer, num_kept_blocks=1) is None


def test_allocate_slots_changes_nothing_when_the_pool_is_short():
    """One call checks, takes the cached prefix and fresh blocks, and hashes; or does nothing."""
    bm = BlockManager(num_blocks=4, block_size=B)
    first = make_seq(list(range(9)))
    grow(bm, first, 9)  # blocks 0-2, 0 and 1 hashed
    bm.free(first)  # all free again, 0 and 1 still cached: queue [3, 2, 1, 0]
    again = make_seq(list(range(8)) + [1] * 12)
    cached = bm.find_cached_prefix(again)
    assert cached == [0, 1] and bm.blocks[0].ref_count == 0  # a lookup takes nothing
    # 8 cached + 12 new tokens = 5 blocks: the two cached ones come from the free queue too.
    assert not bm.allocate_slots(again, 12, cached)
    assert again.block_table == [] and again.num_computed == 0 and bm.num_free_blocks == 4
    assert bm.allocate_slots(again, 8, cached)
    assert again.block_table == [0, 1, 3, 2] and again.num_computed == 8
    assert bm.num_hit_tokens == 8 and bm.num_free_blocks == 0


def test_a_block_is_hashed_only_once_its_tokens_are_known():
    """With asynchronous scheduling the last input token may still be on the device."""
    bm = BlockManager(num_blocks=4, block_size=B)
    seq = make_seq([1, 2, 3])
    grow(bm, seq, 3)
    seq.num_placeholders = 1  # token 3 sampled, not on the host yet
    grow(bm, seq, 1)  # the block is full, but its last id is unknown
    assert bm.blocks[0].hash is None
    seq.append_token(4)
    grow(bm, seq, 1)
    assert bm.blocks[0].hash is not None and bm.hash_to_block[bm.blocks[0].hash] == 0


def test_reset_frees_and_forgets_everything():
    bm = BlockManager(num_blocks=4, block_size=B)
    grow(bm, make_seq(list(range(9))), 9)
    bm.reset()
    assert bm.num_free_blocks == 4 and not bm.hash_to_block
    assert bm.find_cached_prefix(make_seq(list(range(9)))) == []
