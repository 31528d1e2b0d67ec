"""The small compressed engine the compression tests share: block 16, budget 64 (4 blocks),
observation window 16 (the model: conftest.py's `folder`, the tiny random Qwen3)."""
B, BUDGET, W = 16, 64, 16
C = BUDGET // B
GREEDY = dict(temperature=0, ignore_eos=True)


def slots(table: list[int], positions: list[int]) -> list[int]:
    """Flat cache slots of logical-in-physical positions under a block table."""
    return [table[p // B] * B + p % B for p in positions]


def assert_compressed_rows_within_cap(step) -> None:
    """A compressed row never holds more than C + 1 blocks, nor writes past them."""
    for sid, row in step.requests.items():
        if sid in step.compressions or row.start > row.phys_start:
            assert len(row.block_table) <= C + 1
            assert row.phys_start + row.num_tokens <= (C + 1) * B


def expected_compressions(prompt_len: int, new_tokens: int) -> int:
    """Writes of tokens 0 .. P+N-2; compress before a write when (C+1)*b are resident."""
    phys, count = 0, 0
    for t in range(prompt_len + new_tokens - 1):
        if t >= prompt_len and phys >= (C + 1) * B:  # decode writes only: prefill never compresses
            phys, count = C * B, count + 1
        phys += 1
    if phys > (C + 1) * B:  # a long prompt compresses before its first decode write
        count += 1
    return count
