"""What the engine and a runner exchange each step (see zipage/engine/llm_engine.py).

Both are messages: built once, never written afterwards. A ``SchedulerOutput`` holds copies
of everything the runner reads (positions, token ids, block tables), so the scheduler may
move its counters on as soon as the step is scheduled; a ``StepResult`` holds everything
the step produced, keyed by request (``Sequence.seq_id``).
"""
from dataclasses import dataclass, field

from zipage.engine.sequence import TeacherRecord
from zipage.sampling_params import SamplingParams


@dataclass(slots=True)
class ScheduledRequest:
    """One request's new tokens in a step, and where their KV and window queries go."""
    seq_id: int
    start: int  # logical position of the first new token (its RoPE position)
    phys_start: int  # physical KV index of the first new token, after this step's compression
    num_tokens: int  # new tokens computed this step
    # Ids of the new tokens that the host knows. With input_from_previous the last new token
    # is the previous step's sample for this request, still on the device: one id fewer.
    token_ids: list[int]
    input_from_previous: bool
    block_table: list[int]  # KV blocks after this step's compression; entry i holds physical
    #                         tokens i*b .. (i+1)*b - 1
    query_slot: int  # ring of window queries (observation window); -1: none (Full KV)
    # Set when the logits of the last new token are sampled (else None, a prefill chunk):
    sampling: SamplingParams | None = None
    seed: int | None = None
    output_index: int = 0  # index of the sampled token among the outputs (forced tokens,
    #                        min_tokens)

    @property
    def sample_position(self) -> int:
        """Logical position of the token being sampled."""
        return self.start + self.num_tokens


@dataclass(slots=True)
class CompressionTask:
    """Compress a request to C*b tokens before its step's forward (docs/method.md,
    compression trigger; docs/design.md, "Compression")."""
    seq_id: int
    query_slot: int  # whose ring holds the queries of its last W computed tokens
    old_table: list[int]  # blocks read
    target_table: list[int]  # C + 1 blocks written: kept tokens go to the first C
    phys_len: int  # physical tokens before compression (>= (C + 1) * b)
    num_computed: int  # logical tokens before compression (places the window in the ring)
    has_history: bool  # compressed before: its kept slots carry a global score


@dataclass
class SchedulerOutput:
    # seq_id -> its new tokens, in batch order: one-token rows first (the decode kernel
    # takes them), then prefill chunks.
    requests: dict[int, ScheduledRequest] = field(default_factory=dict)
    # seq_id -> compression to run before the forward; each such request is in `requests`.
    compressions: dict[int, CompressionTask] = field(default_factory=dict)
    preempted: list[int] = field(default_factory=list)  # seq ids whose KV was dropped

    @property
    def num_batched_tokens(self) -> int:
        return sum(r.num_tokens for r in self.requests.values())

    @property
    def is_empty(self) -> bool:
        return not self.requests and not self.compressions


@dataclass
class StepResult:
    """What a launched step produced, returned by ``runner.collect``."""
    sampled: dict[int, int] = field(default_factory=dict)  # seq_id -> token, rows that sample
    teacher: dict[int, TeacherRecord] = field(default_factory=dict)  # seq_id -> forced-token record
    compression_time_s: float = 0.0  # device time of this step's compressions
    device_time_s: float | None = None  # device time of the whole step, when the runner times
    #                                     steps (ModelRunner.time_steps; traces, calibration)
