"""Turn a SchedulerOutput into flat tensors for one forward pass (host-side work only)."""
from dataclasses import dataclass

import numpy as np
import torch

from zipage.engine.messages import SchedulerOutput
from zipage.layers.attention import AttentionMetadata


@dataclass
class SampleRequest:
    rows: list[int]  # token row whose logits are sampled, one per request that samples
    seq_ids: list[int]
    temperature: list[float]
    top_k: list[int]
    top_p: list[float]
    min_p: list[float]
    seeds: list[int]
    positions: list[int]  # logical position of the token being generated
    forced: list[int]  # teacher-forced token per row, -1 when sampling
    suppress: list[tuple[int, list[int]]]  # (row index, token ids masked: min_tokens not reached)


@dataclass
class Batch:
    input_ids: list[int]
    positions: list[int]
    slots: list[int]
    query_slots: list[int]
    num_decode: int
    decode_tables: list[list[int]]
    decode_context_lens: list[int]
    prefill_tables: list[list[int]]
    prefill_q_lens: list[int]
    prefill_context_lens: list[int]
    sample: SampleRequest
    pending_inputs: list[tuple[int, int]]  # (row, seq_id): input the previous step samples


def build_batch(step: SchedulerOutput, block_size: int, window: int) -> Batch:
    b = block_size
    ids, pos, slots, qslots = [], [], [], []
    dec_tables, dec_lens, pre_tables, pre_q, pre_lens = [], [], [], [], []
    s = SampleRequest([], [], [], [], [], [], [], [], [], [])
    pending = []
    for row in step.requests.values():
        start, phys, n, table = row.start, row.phys_start, row.num_tokens, row.block_table
        ids += row.token_ids
        if row.input_from_previous:  # only ever the last token; patched on the device
            pending.append((len(ids), row.seq_id))
            ids.append(0)
        if n == 1:  # decode rows: most of a batch
            pos.append(start)
            slots.append(table[phys // b] * b + phys % b)
            qslots.append(row.query_slot * window + start % window if row.query_slot >= 0 else -1)
            dec_tables.append(table)
            dec_lens.append(phys + 1)
        else:
            pos += range(start, start + n)
            slots += [table[p // b] * b + p % b for p in range(phys, phys + n)]
            _prefill_query_slots(qslots, row.query_slot, start, n, window)
            pre_tables.append(table)
            pre_q.append(n)
            pre_lens.append(phys + n)
        p = row.sampling
        if p is not None:
            s.rows.append(len(ids) - 1)
            s.seq_ids.append(row.seq_id)
            s.temperature.append(p.temperature)
            s.top_k.append(p.top_k)
            s.top_p.append(p.top_p)
            s.min_p.append(p.min_p)
            s.seeds.append(row.seed)
            s.positions.append(row.sample_position)
            if row.output_index < p.min_tokens:
                s.suppress.append((len(s.rows) - 1, p.stop_token_ids))
            s.forced.append(p.forced_tokens[row.output_index] if p.forced_tokens else -1)
    return Batch(ids, pos, slots, qslots, len(dec_lens), dec_tables, dec_lens,
                 pre_tables, pre_q, pre_lens, s, pending)


def _prefill_query_slots(qslots: list, query_slot: int, start: int, n: int, window: int) -> None:
    if query_slot < 0:
        qslots += [-1] * n
        return
    # Only the last W tokens reach the ring; earlier ones would collide in one launch.
    qslots += [-1] * max(0, n - window)
    qslots += [query_slot * window + t % window
               for t in range(max(start, start + n - window), start + n)]


def pad_tables(tables: list[list[int]], width: int | None = None,
               out: np.ndarray | None = None) -> np.ndarray:
    """(len(tables), width) int32, -1 padded; numpy is far faster than nested lists."""
    width = width or max((len(t) for t in tables), default=1)
    arr = np.full((len(tables), width), -1, dtype=np.int32) if out is None else out
    if out is not None:
        arr.fill(-1)
    for i, t in enumerate(tables):
        arr[i, :len(t)] = t
    return arr


def to_device(values, dtype, device) -> torch.Tensor:
    return torch.from_numpy(np.asarray(values, dtype=dtype)).to(device, non_blocking=True)


def attention_metadata(batch: Batch, device, with_queries: bool) -> AttentionMetadata:
    def i32(x):
        return to_device(x, np.int32, device)

    meta = AttentionMetadata(
        slot_mapping=to_device(batch.slots, np.int64, device),
        num_decode=batch.num_decode,
        query_slot_mapping=to_device(batch.query_slots, np.int64, device) if with_queries else None)
    if batch.num_decode:
        meta.decode_block_tables = i32(pad_tables(batch.decode_tables))
        meta.decode_context_lens = i32(batch.decode_context_lens)
    if batch.prefill_q_lens:
        cu = [0]
        for q in batch.prefill_q_lens:
            cu.append(cu[-1] + q)
        meta.prefill_block_tables = i32(pad_tables(batch.prefill_tables))
        meta.prefill_cu_seqlens_q = i32(cu)
        meta.prefill_context_lens = i32(batch.prefill_context_lens)
        meta.prefill_max_q_len = max(batch.prefill_q_lens)
    return meta
