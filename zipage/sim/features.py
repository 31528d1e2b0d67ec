"""What a step costs depends on: its rows, the KV they read, its prefill work, its
compressions. ``step_features`` reads them off a ``SchedulerOutput`` (pure Python), the same
way for a measured step (traces, calibration) and a simulated one."""
from dataclasses import asdict, dataclass

from zipage.engine.messages import SchedulerOutput


@dataclass(frozen=True)
class StepFeatures:
    decode_rows: int = 0  # one-token rows (true decodes)
    prefill_rows: int = 0  # prefill chunks (prompts, recomputes after a preemption)
    prefill_tokens: int = 0  # tokens of the prefill chunks
    kv_read_tokens: int = 0  # sum of the decode rows' context lengths (physical KV attended)
    prefill_context_tokens: int = 0  # sum of the prefill rows' context lengths
    prefill_attention: int = 0  # sum over prefill rows of q_len x mean context (attention work)
    table_blocks: int = 0  # block-table entries of all rows (host work per row)
    compressions: int = 0
    compressed_tokens: int = 0  # physical tokens read by this step's compressions
    preempted: int = 0

    @property
    def rows(self) -> int:
        return self.decode_rows + self.prefill_rows

    @property
    def is_mixed(self) -> bool:
        """Has a prefill chunk: the forward runs eagerly (CUDA graphs serve decode-only steps)."""
        return self.prefill_rows > 0

    def as_dict(self) -> dict:
        return asdict(self)


def step_features(step: SchedulerOutput) -> StepFeatures:
    decode = prefill = prefill_tokens = kv = prefill_ctx = attention = blocks = 0
    for row in step.requests.values():
        n, ctx = row.num_tokens, row.phys_start + row.num_tokens
        blocks += len(row.block_table)
        if n == 1:
            decode += 1
            kv += ctx
        else:
            prefill += 1
            prefill_tokens += n
            prefill_ctx += ctx
            attention += n * (row.phys_start + (n + 1) // 2)
    tasks = step.compressions.values()
    return StepFeatures(decode, prefill, prefill_tokens, kv, prefill_ctx, attention, blocks,
                        len(step.compressions), sum(t.phys_len for t in tasks),
                        len(step.preempted))
