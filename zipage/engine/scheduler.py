"""Continuous batching with chunked prefill, preemption by recompute and compression.

Each step has a token budget. Running requests are served first (decodes take one token,
unfinished prefills take a chunk), then waiting requests are admitted FCFS with what is
left. A request whose resident KV reaches the cap ``(C + 1) * b`` is compressed to
``C * b`` tokens before its pending token is written.
"""
from collections import deque
from dataclasses import dataclass, field

from zipage.engine.block_manager import BlockManager
from zipage.engine.sequence import PENDING, Sequence, Status


@dataclass
class CompressionTask:
    seq: Sequence
    old_table: list[int]
    target_table: list[int]
    release: list[int]
    phys_len: int


@dataclass
class SchedulerOutput:
    seqs: list[Sequence] = field(default_factory=list)  # batch order: one-token rows first
    num_new_tokens: list[int] = field(default_factory=list)
    compressions: list[CompressionTask] = field(default_factory=list)
    preempted: list[Sequence] = field(default_factory=list)
    # set by advance(): (seq, index of its pending token, peak KV and compressions so far)
    pending: list[tuple[Sequence, int, int, int]] = field(default_factory=list)

    @property
    def num_tokens(self) -> int:
        return sum(self.num_new_tokens)

    @property
    def is_empty(self) -> bool:
        return not self.seqs and not self.compressions


@dataclass
class SchedulerConfig:
    block_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    num_kept_blocks: int | None = None  # C; None disables compression (Full KV)
    num_query_slots: int = 0


class Scheduler:
    def __init__(self, cfg: SchedulerConfig, block_manager: BlockManager):
        self.cfg = cfg
        self.block_manager = block_manager
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.free_slots = list(range(cfg.num_query_slots))
        self.num_preemptions = 0

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    @property
    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def _needs_compression(self, seq: Sequence) -> bool:
        C = self.cfg.num_kept_blocks
        return (C is not None and seq.num_uncomputed == 1
                and seq.phys_len >= (C + 1) * self.cfg.block_size)

    def _preempt(self, seq: Sequence) -> None:
        self.block_manager.free(seq)
        if seq.query_slot >= 0:
            self.free_slots.append(seq.query_slot)
        seq.reset_for_recompute()
        self.running.remove(seq)
        self.waiting.appendleft(seq)
        self.num_preemptions += 1

    def _victim(self, exclude: set[int]) -> Sequence | None:
        # Compressed KV is lossy: recomputing it would change the output, so never evict it.
        for seq in reversed(self.running):
            if seq.seq_id not in exclude and not seq.is_compressed:
                return seq
        return None

    def schedule(self) -> SchedulerOutput:
        out = SchedulerOutput()
        budget = self.cfg.max_num_batched_tokens
        bm = self.block_manager
        scheduled: set[int] = set()
        rows: list[tuple[Sequence, int]] = []
        for seq in list(self.running):
            if budget == 0:
                break
            if seq.status != Status.RUNNING:
                continue  # preempted earlier in this loop
            num_new = min(seq.num_uncomputed, budget)
            ok, task = self._reserve(seq, num_new, scheduled, out)
            if not ok:
                if not seq.is_compressed and not scheduled:
                    self._preempt(seq)
                    out.preempted.append(seq)
                continue
            if task is not None:
                out.compressions.append(task)
            bm.append_slots(seq, num_new)
            bm.register_full_blocks(seq, seq.num_computed + num_new)
            rows.append((seq, num_new))
            scheduled.add(seq.seq_id)
            budget -= num_new
        if not out.preempted:
            budget = self._admit(rows, budget)
        rows.sort(key=lambda r: r[1] != 1)  # one-token rows first: the decode kernel takes them
        out.seqs = [s for s, _ in rows]
        out.num_new_tokens = [n for _, n in rows]
        return out

    def _reserve(self, seq: Sequence, num_new: int, scheduled: set[int],
                 out: SchedulerOutput) -> tuple[bool, CompressionTask | None]:
        """Plan the request's compression if it is due and make room for ``num_new`` tokens,
        preempting newer uncompressed requests if needed: (room made, compression or None)."""
        bm, task = self.block_manager, None
        while True:
            due = self._needs_compression(seq)
            if due and task is None:
                plan = bm.plan_compression(seq, self.cfg.num_kept_blocks)
                if plan is not None:
                    task = CompressionTask(seq, list(seq.block_table), plan[0], plan[1],
                                           seq.phys_len)
                    seq.block_table = plan[0]
                    seq.num_evicted += seq.phys_len - self.cfg.num_kept_blocks * self.cfg.block_size
                    due = False
            if not due and bm.can_append(seq, num_new):
                return True, task
            victim = self._victim(exclude=scheduled | {seq.seq_id})
            if victim is None:
                return False, task
            self._preempt(victim)
            out.preempted.append(victim)

    def _admit(self, rows: list, budget: int) -> int:
        bm = self.block_manager
        while self.waiting and budget > 0 and len(self.running) < self.cfg.max_num_seqs:
            seq = self.waiting[0]
            bm.allocate_prefix(seq)
            num_new = min(seq.num_uncomputed, budget)
            if not bm.can_append(seq, num_new):
                bm.free(seq)
                seq.num_computed = 0
                break
            self.waiting.popleft()
            bm.append_slots(seq, num_new)
            bm.register_full_blocks(seq, seq.num_computed + num_new)
            seq.status = Status.RUNNING
            if self.cfg.num_query_slots:
                seq.query_slot = self.free_slots.pop()
            self.running.append(seq)
            rows.append((seq, num_new))
            budget -= num_new
        return budget

    def postprocess(self, out: SchedulerOutput, sampled: dict[int, int], eos_ids: set[int]) -> list[Sequence]:
        """Advance counters after the runner executed ``out``; returns finished requests."""
        self.advance(out)
        return self.fill(out, sampled, eos_ids)

    def advance(self, out: SchedulerOutput) -> None:
        """Counters of a launched step, before its tokens are known.

        Every row that samples gets a PENDING token (filled by `fill`), so the next step can
        be scheduled while this one runs. A request that reaches max_tokens / max_model_len
        finishes here (resources freed; its reason is settled by `fill`).
        """
        for task in out.compressions:
            self.block_manager.release_blocks(task.release)
            task.seq.num_compressions += 1
        for seq, num_new in zip(out.seqs, out.num_new_tokens):
            samples = seq.num_computed + num_new == len(seq)
            seq.num_computed += num_new
            seq.peak_kv_tokens = max(seq.peak_kv_tokens, seq.phys_len)
            if not samples or seq.is_finished:
                continue  # a prefill chunk short of the prompt's end, or stopped meanwhile
            out.pending.append((seq, len(seq), seq.peak_kv_tokens, seq.num_compressions))
            seq.append_token(PENDING)
            if seq.num_output_tokens >= seq.params.max_tokens or len(seq) >= self.cfg.max_model_len:
                seq.finish_reason = "length"
                self._finish(seq)

    def fill(self, out: SchedulerOutput, sampled: dict[int, int], eos_ids: set[int]) -> list[Sequence]:
        """Tokens of an advanced step; returns the requests whose output is now complete."""
        done = []
        for seq, index, peak, compressions in out.pending:
            if index >= len(seq) or seq.seq_id not in sampled:
                continue  # cut by an earlier stop
            token = sampled[seq.seq_id]
            seq.token_ids[index] = token
            p = seq.params
            if not p.ignore_eos and (token in eos_ids or token in p.stop_token_ids):
                self.finish_early(seq, "stop", index + 1, peak, compressions)
                done.append(seq)
            elif seq.is_finished and index == len(seq) - 1:
                done.append(seq)  # finished by length in `advance`
        return done

    def finish_early(self, seq: Sequence, reason: str, num_tokens: int | None = None,
                     peak_kv_tokens: int | None = None, num_compressions: int | None = None) -> None:
        """Stop a request (a stop token or string), keeping its first ``num_tokens`` tokens
        and the metrics it had then: steps launched since do not count."""
        if num_tokens is not None:
            del seq.token_ids[num_tokens:]
        if peak_kv_tokens is not None:
            seq.peak_kv_tokens, seq.num_compressions = peak_kv_tokens, num_compressions
        seq.finish_reason = reason
        if not seq.is_finished:
            self._finish(seq)

    def _finish(self, seq: Sequence) -> None:
        if seq.status == Status.WAITING:  # preempted while its last step was in flight
            self.waiting.remove(seq)
        else:
            self.running.remove(seq)
        seq.status = Status.FINISHED
        self.block_manager.free(seq)
        if seq.query_slot >= 0:
            self.free_slots.append(seq.query_slot)
            seq.query_slot = -1
