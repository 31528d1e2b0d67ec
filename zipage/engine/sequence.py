"""Request state as the scheduler and block manager see it: token counts and block ids."""
from dataclasses import dataclass
from enum import Enum, auto
from itertools import count

from zipage.sampling_params import SamplingParams


class Status(Enum):
    WAITING = auto()
    RUNNING = auto()
    FINISHED = auto()  # resources freed; its last sampled token may still be on the way


@dataclass(frozen=True, slots=True)
class TeacherRecord:
    """One teacher-forced token: its log-probability and the greedy choice at that point."""
    logprob: float
    argmax: int
    forced: int

    @property
    def greedy_match(self) -> bool:
        return self.argmax == self.forced


class Sequence:
    """One sample of one prompt.

    Counters (all in tokens):
      * ``len(seq)``: logical length, prompt plus generated tokens, including
        ``num_placeholders``: tokens sampled on the device whose ids the host does not know
        yet (asynchronous scheduling; ``token_ids`` holds the known ones).
      * ``num_computed``: logical tokens whose KV has been computed. While decoding it is
        ``len(seq) - 1``: the last sampled token is written by the next step.
      * ``num_evicted``: tokens removed by compression; physical = logical - evicted.
    """

    _ids = count()

    def __init__(self, token_ids: list[int], params: SamplingParams, block_size: int,
                 request_id: int = 0, sample_index: int = 0, seed: int | None = None):
        self.seq_id = next(Sequence._ids)
        self.request_id = request_id
        self.sample_index = sample_index
        self.token_ids = list(token_ids)
        self.num_prompt_tokens = len(token_ids)
        self.params = params
        self.block_size = block_size
        self.seed = seed
        self.max_num_tokens = self.num_prompt_tokens + params.max_tokens  # capped by Scheduler.add
        self.status = Status.WAITING
        self.block_table: list[int] = []
        self.num_placeholders = 0
        self.num_computed = 0
        self.num_evicted = 0
        self.query_slot = -1
        # Reported metrics: counted when a step's results arrive, so steps launched after
        # the request stopped (asynchronous scheduling) never count.
        self.num_compressions = 0
        self.num_preemptions = 0
        self.peak_kv_tokens = 0
        self.teacher_records: list[TeacherRecord] = []
        self.finish_reason: str | None = None  # set once the request's output is complete
        self.arrival_time = 0.0
        self.first_token_time: float | None = None
        self.finish_time: float | None = None

    @property
    def prompt_index(self) -> int:  # the name before request_id
        return self.request_id

    def __len__(self) -> int:
        return len(self.token_ids) + self.num_placeholders

    @property
    def num_output_tokens(self) -> int:
        return len(self) - self.num_prompt_tokens

    @property
    def output_token_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens:]

    @property
    def phys_len(self) -> int:
        """KV entries resident in this request's blocks."""
        return self.num_computed - self.num_evicted

    @property
    def num_uncomputed(self) -> int:
        return len(self) - self.num_computed

    @property
    def compute_target(self) -> int:
        """Tokens to compute before the next sample: the prompt for a new request; after a
        preemption, every token but the last, which the next decode step writes (so a
        recomputed request reaches its compression point exactly as it did before)."""
        return self.num_prompt_tokens if len(self) == self.num_prompt_tokens else len(self) - 1

    @property
    def is_compressed(self) -> bool:
        return self.num_evicted > 0

    @property
    def is_finished(self) -> bool:
        return self.status == Status.FINISHED

    def append_token(self, token_id: int) -> None:
        """A sampled token reached the host: it replaces the oldest placeholder, if any."""
        self.token_ids.append(token_id)
        if self.num_placeholders:
            self.num_placeholders -= 1

    def reset_for_recompute(self) -> None:
        """Preemption by recompute: forget all KV; the tokens are kept."""
        self.status = Status.WAITING
        self.block_table = []
        self.num_computed = 0
        self.num_evicted = 0
        self.query_slot = -1
        self.num_preemptions += 1
