"""Continuous batching with chunked prefill, preemption by recompute and compression.

Each step has a token budget (``max_num_batched_tokens``). Running requests are served
first (decodes take one token, unfinished prefills take a chunk), then waiting requests are
admitted FCFS with what is left. A request whose resident KV reaches the cap ``(C + 1) * b``
is compressed to ``C * b`` tokens before its pending token is written (docs/method.md,
compression trigger). Counters move when a step is scheduled; `update_from_output` applies
the step's sampled tokens when they reach the host, one step later with asynchronous
scheduling.
"""
from collections import deque
from dataclasses import dataclass
from typing import Callable

from zipage.engine.block_manager import BlockManager
from zipage.engine.messages import CompressionTask, ScheduledRequest, SchedulerOutput, StepResult
from zipage.engine.sequence import Sequence, Status


@dataclass
class SchedulerConfig:
    block_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    num_kept_blocks: int | None = None  # C; None disables compression (Full KV)
    num_query_slots: int = 0
    # SnapKV (docs/method.md §14): a prompt longer than the budget is compressed once, right
    # after prefill; nothing is evicted while decoding, so requests grow as in Full KV.
    compress_prompt_only: bool = False


def prefill_chunk(remaining: int, tokens_left: int) -> int:
    """Tokens of a prefill to compute now: all that remain, or a part of at least two that
    leaves at least two. A one-token row is then always a true decode: no prefill compresses
    before it is complete (docs/method.md, compression trigger) and no wide block table of an
    uncompressed long prompt reaches the decode kernel's CUDA-graph tables."""
    if remaining <= tokens_left:
        return remaining
    num_new = min(tokens_left, remaining - 2)
    return num_new if num_new >= 2 else 0


class Scheduler:
    def __init__(self, cfg: SchedulerConfig, block_manager: BlockManager):
        self.cfg = cfg
        self.block_manager = block_manager
        self.requests: dict[int, Sequence] = {}  # every request whose output is not complete
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.free_slots = list(range(cfg.num_query_slots))
        self.num_preemptions = 0
        self.num_compressions = 0  # counted with the step's results, like Sequence's
        C = cfg.num_kept_blocks  # compress once (C + 1) * b tokens are resident
        self._cap_tokens = float("inf") if C is None else (C + 1) * cfg.block_size
        self._deferred_frees: list[int] = []  # blocks released once a step is fully planned
        self._length_limited: list[Sequence] = []

    def add(self, seq: Sequence) -> None:
        cap = self.cfg.max_model_len
        if self.cfg.num_kept_blocks is None or self.cfg.compress_prompt_only:
            # Full KV (or growing after one compression): a sample cannot outgrow the pool
            cap = min(cap, self.block_manager.num_blocks * self.cfg.block_size)
        seq.max_num_tokens = min(seq.max_num_tokens, cap)
        self.requests[seq.seq_id] = seq
        self.waiting.append(seq)

    @property
    def has_unfinished(self) -> bool:
        return bool(self.requests)

    # -- one step -------------------------------------------------------------------------
    def schedule(self) -> SchedulerOutput:
        out = SchedulerOutput()
        tokens_left = self.cfg.max_num_batched_tokens
        for seq in list(self.running):
            if tokens_left == 0:
                break
            if seq.status != Status.RUNNING:
                continue  # preempted earlier in this loop
            num_new = self._num_new_tokens(seq, tokens_left)
            if num_new == 0:
                continue
            if not self._make_room(seq, num_new, out):
                if (self.cfg.compress_prompt_only or not seq.is_compressed) and not out.requests:
                    self._preempt(seq, out)
                continue
            self._add_row(seq, num_new, out)
            tokens_left -= num_new
        if not out.preempted:
            self._admit(out, tokens_left)
        self._end_step()
        rows = sorted(out.requests.values(), key=lambda r: r.num_tokens != 1)
        out.requests = {r.seq_id: r for r in rows}  # one-token rows first: the decode kernel
        return out

    def _num_new_tokens(self, seq: Sequence, tokens_left: int) -> int:
        remaining = seq.compute_target - seq.num_computed
        return 1 if remaining == 0 else prefill_chunk(remaining, tokens_left)  # 1: a decode

    def _compression_due(self, seq: Sequence) -> bool:
        if seq.num_tokens - seq.num_computed != 1:
            return False
        if self.cfg.compress_prompt_only:  # only the first token after a full prefill
            return (seq.num_computed == seq.num_prompt_tokens and not seq.is_compressed
                    and seq.phys_len > self.cfg.num_kept_blocks * self.cfg.block_size)
        return seq.num_computed - seq.num_evicted >= self._cap_tokens

    def _make_room(self, seq: Sequence, num_new: int, out: SchedulerOutput) -> bool:
        """Plan the request's compression if it is due and allocate its new tokens,
        preempting newer uncompressed requests if needed. False: no room this step."""
        while True:
            if self._compression_due(seq):
                self._plan_compression(seq, out)
            if not self._compression_due(seq) and self.block_manager.allocate_slots(seq, num_new):
                return True
            victim = self._victim(seq, out)
            if victim is None:
                return False
            self._preempt(victim, out)

    def _plan_compression(self, seq: Sequence, out: SchedulerOutput) -> None:
        C, b = self.cfg.num_kept_blocks, self.cfg.block_size
        plan = self.block_manager.plan_compression(seq, C)
        if plan is None:
            return  # no free blocks to replace the shared ones yet
        target, release = plan
        out.compressions[seq.seq_id] = CompressionTask(
            seq.seq_id, seq.query_slot, seq.block_table, target, seq.phys_len,
            seq.num_computed, seq.is_compressed)
        seq.block_table = target
        seq.num_evicted += seq.phys_len - C * b
        self._deferred_frees += release  # read by this step's compression: reuse them later

    def _victim(self, seq: Sequence, out: SchedulerOutput) -> Sequence | None:
        # Compressed KV is lossy: recomputing it would change the output, so never evict it.
        # Prompt-only compressed requests grow, so they may be preempted (else the pool could
        # fill with requests that all wait): the recompute keeps the whole prompt.
        lossless = self.cfg.compress_prompt_only
        for other in reversed(self.running):
            if other is not seq and other.seq_id not in out.requests and (
                    lossless or not other.is_compressed):
                return other
        return None

    def _preempt(self, seq: Sequence, out: SchedulerOutput) -> None:
        self.block_manager.free(seq)
        self._return_slot(seq)
        seq.reset_for_recompute()
        self.running.remove(seq)
        self.waiting.appendleft(seq)
        self.num_preemptions += 1
        out.preempted.append(seq.seq_id)

    def _admit(self, out: SchedulerOutput, tokens_left: int) -> None:
        bm = self.block_manager
        while self.waiting and tokens_left > 0 and len(self.running) < self.cfg.max_num_seqs:
            seq = self.waiting[0]
            cached = bm.find_cached_prefix(seq)
            num_new = prefill_chunk(seq.compute_target - len(cached) * self.cfg.block_size,
                                    tokens_left)
            if num_new == 0 or not bm.allocate_slots(seq, num_new, cached):
                break
            self.waiting.popleft()
            seq.status = Status.RUNNING
            if self.cfg.num_query_slots:
                seq.query_slot = self.free_slots.pop()
            self.running.append(seq)
            self._add_row(seq, num_new, out)
            tokens_left -= num_new

    def _add_row(self, seq: Sequence, num_new: int, out: SchedulerOutput) -> None:
        start, end = seq.num_computed, seq.num_computed + num_new
        row = ScheduledRequest(seq.seq_id, start, start - seq.num_evicted, num_new,
                               seq.token_ids[start:end], end > len(seq.token_ids),
                               seq.block_table, seq.query_slot)
        if end == seq.num_tokens:  # the last token: its logits are sampled
            row.sampling, row.seed = seq.params, seq.seed
            row.output_index = seq.num_tokens - seq.num_prompt_tokens
            seq.add_placeholder()
            if seq.num_tokens >= seq.max_num_tokens:
                self._length_limited.append(seq)  # no further step: free it with this one
        seq.num_computed = end
        out.requests[seq.seq_id] = row

    def _end_step(self) -> None:
        """Release what this step no longer needs once every block of it is allocated (its
        own forward and compressions still read them; later steps run after it)."""
        self.block_manager.release_blocks(self._deferred_frees)
        for seq in self._length_limited:
            self._free(seq)
        self._deferred_frees, self._length_limited = [], []

    # -- results ----------------------------------------------------------------------------
    def update_from_output(self, out: SchedulerOutput, result: StepResult, eos_ids: set[int],
                           stop_string: Callable[[Sequence], bool] | None = None) -> list[Sequence]:
        """Apply a step's results; returns the requests that got a token, in batch order
        (``finish_reason`` set for those now complete). Requests that stopped before this
        step's results arrived ignore them."""
        updated = []
        for seq_id, row in out.requests.items():
            seq = self.requests.get(seq_id)
            if seq is None:
                continue
            seq.peak_kv_tokens = max(seq.peak_kv_tokens, row.phys_start + row.num_tokens)
            if seq_id in out.compressions:
                seq.num_compressions += 1
                self.num_compressions += 1
            if row.sampling is None:
                continue
            token = result.sampled[seq_id]
            seq.append_token(token)
            if seq_id in result.teacher:
                seq.teacher_records.append(result.teacher[seq_id])
            p = seq.params
            stopped = not p.ignore_eos and (token in eos_ids or token in p.stop_token_ids)
            if stopped or (stop_string is not None and stop_string(seq)):
                self.finish(seq, "stop")
            elif len(seq.token_ids) >= seq.max_num_tokens:  # known tokens: placeholders follow
                self.finish(seq, "length")
            updated.append(seq)
        return updated

    def finish(self, seq: Sequence, reason: str) -> None:
        """The request's output is complete: tokens sampled after this one are dropped."""
        seq.finish_reason = reason
        seq.drop_placeholders()
        self._free(seq)
        del self.requests[seq.seq_id]

    def _free(self, seq: Sequence) -> None:
        if seq.status == Status.FINISHED:
            return
        if seq.status == Status.WAITING:  # preempted while its last step was in flight
            self.waiting.remove(seq)
        else:
            self.running.remove(seq)
        seq.status = Status.FINISHED
        self.block_manager.free(seq)
        self._return_slot(seq)

    def _return_slot(self, seq: Sequence) -> None:
        if seq.query_slot >= 0:
            self.free_slots.append(seq.query_slot)
            seq.query_slot = -1

    def abort_all(self) -> list[Sequence]:
        """Drop every request (an interrupted or failed run); the caller resets the blocks."""
        dropped = list(self.requests.values())
        for seq in dropped:
            seq.status, seq.block_table, seq.query_slot = Status.FINISHED, [], -1
        self.requests.clear()
        self.waiting.clear()
        self.running.clear()
        self.free_slots = list(range(self.cfg.num_query_slots))
        self._deferred_frees, self._length_limited = [], []
        return dropped
