"""Synthetic steps for calibration: SchedulerOutputs with chosen rows, contexts, prefill
chunks and compressions, over distinct KV blocks of the pool. ``calibration_grid`` lists the
points ``bench calibrate`` times.

The values do change the time on a power-limited GPU: one token id in every row (and a pool
of zeros) makes every row of every GEMM the same, which draws less power than a real batch,
so the clock stays higher and the step is faster than the engine's (docs/throughput_model.md,
"Power limit"). ``token_ids`` gives each row its own tokens.
"""
from dataclasses import asdict, dataclass
from typing import Callable

from zipage.engine.messages import CompressionTask, ScheduledRequest, SchedulerOutput
from zipage.sampling_params import SamplingParams


@dataclass(frozen=True)
class GridPoint:
    decode_rows: int
    decode_context: int  # physical KV tokens each decode row attends (its own included)
    prefill_rows: int = 0
    prefill_tokens: int = 0  # new tokens of each prefill chunk
    prefill_prefix: int = 0  # tokens each chunk's request has cached already
    compressions: int = 0  # of the decode rows, compressed before this step's forward
    compression_len: int = 0  # physical tokens of each compressing request before it

    @property
    def name(self) -> str:
        text = f"decode {self.decode_rows}x{self.decode_context}" if self.decode_rows else ""
        if self.prefill_rows:
            text += (f"{' + ' if text else ''}prefill {self.prefill_rows}x"
                     f"{self.prefill_tokens}@{self.prefill_prefix}")
        if self.compressions:
            text += f" + compress {self.compressions}x{self.compression_len}"
        return text

    def as_dict(self) -> dict:
        return asdict(self)


def synthetic_step(p: GridPoint, block_size: int, num_blocks: int, num_kept_blocks: int | None,
                   num_query_slots: int, params: SamplingParams,
                   token_ids: Callable[[int], list[int]] | None = None) -> SchedulerOutput:
    """Decode rows first (the batch order the scheduler produces), then prefill chunks;
    every row samples. Blocks are handed out in turn over the pool. ``token_ids(n)`` gives
    a row's n input tokens (default: token 1 everywhere)."""
    b, out, cursor = block_size, SchedulerOutput(), [0]
    tokens = token_ids or (lambda n: [1] * n)

    def blocks(n_tokens: int) -> list[int]:
        n = -(-n_tokens // b)
        if n > num_blocks:
            raise ValueError(f"{n_tokens} tokens need {n} blocks; the pool has {num_blocks}")
        first = cursor[0]
        cursor[0] = (first + n) % num_blocks
        return [(first + j) % num_blocks for j in range(n)]

    def slot(i: int) -> int:
        return i if num_kept_blocks is not None and i < num_query_slots else -1

    for i in range(p.decode_rows):
        ctx, start, table = p.decode_context, p.decode_context - 1, None
        if i < p.compressions:
            old = blocks(p.compression_len)
            table = old[:num_kept_blocks + 1]
            out.compressions[i] = CompressionTask(i, slot(i), old, table, p.compression_len,
                                                  p.compression_len, True)
            ctx, start = num_kept_blocks * b + 1, p.compression_len
        table = table or blocks(ctx)
        out.requests[i] = ScheduledRequest(i, start, ctx - 1, 1, tokens(1), False, table,
                                           slot(i), params, i, 0)
    for j in range(p.prefill_rows):
        sid, n, prefix = p.decode_rows + j, p.prefill_tokens, p.prefill_prefix
        out.requests[sid] = ScheduledRequest(sid, prefix, prefix, n, tokens(n), False,
                                             blocks(prefix + n), slot(sid), params, sid, 0)
    return out


def calibration_grid(compressed: bool, block_size: int, num_kept_blocks: int | None,
                     pool_tokens: int, max_rows: int, max_batched_tokens: int,
                     max_context: int, rows=(1, 8, 32, 64, 128, 256, 384, 512)) -> list[GridPoint]:
    """Points spanning what the engine's steps look like: decode batches over contexts (up to
    the pool: a step never reads more KV than the pool holds), prefill chunks of new prompts
    and of recomputes (long prefixes), and for Zipage compressions in decode batches."""
    rows = [r for r in rows if r <= max_rows] or [max_rows]
    b, pts = block_size, []
    if compressed:
        C = num_kept_blocks
        contexts = sorted({min(128, C * b), C * b + 1, (C + 1) * b})
    else:
        contexts = sorted({c for c in (128, 1024, 4096, 16384, 32768) if c <= max_context}
                          | {max_context})
    for ctx in contexts:
        pts += [GridPoint(r, ctx) for r in rows if r * ctx <= pool_tokens]
    chunk = max_batched_tokens
    small = min(128, chunk // 4)
    def row(i):  # the i-th smallest batch size, or the largest of fewer
        return rows[min(len(rows) - 1, i)]
    mixed = [GridPoint(0, 1, chunk // small, small), GridPoint(0, 1, 1, chunk),
             GridPoint(row(4), contexts[1], max(1, chunk // (4 * small)), small),
             GridPoint(row(2), contexts[-1] if compressed else contexts[1], 1, chunk // 2)]
    if not compressed:  # recompute after a preemption: a long cached prefix per chunk
        prefix = min(max_context - chunk, pool_tokens // 2 - chunk)
        if prefix > 0:
            mixed.append(GridPoint(row(1), contexts[1], 1, chunk // 2, prefix))
    pts += [p for p in mixed if kv_tokens(p) <= pool_tokens]
    if compressed:
        C = num_kept_blocks
        r = max(x for x in rows if x * (C + 1) * b <= pool_tokens)
        for k in sorted({1, 4, 16, 64, r // 2, r}):
            if k <= r:
                pts.append(GridPoint(r, C * b + 1, compressions=k, compression_len=(C + 1) * b))
        long_k = max(1, r // 16)  # a prompt longer than the cap: compressed right after it
        if long_k * 4 * (C + 1) * b + r * (C + 1) * b <= pool_tokens:
            pts.append(GridPoint(r, C * b + 1, compressions=long_k,
                                 compression_len=4 * (C + 1) * b))
    return pts


def kv_tokens(p: GridPoint) -> int:
    """KV tokens a point's rows hold (compressing rows: their decode context only)."""
    return p.decode_rows * p.decode_context + p.prefill_rows * (p.prefill_prefix + p.prefill_tokens)
