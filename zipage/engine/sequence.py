"""Request state as the scheduler and block manager see it: token counts and block ids."""
from enum import Enum, auto
from itertools import count

from zipage.sampling_params import SamplingParams


PENDING = -1  # a sampled token not known on the host yet (asynchronous scheduling)


class Status(Enum):
    WAITING = auto()
    RUNNING = auto()
    FINISHED = auto()


class Sequence:
    """One sample of one prompt.

    Counters (all in tokens):
      * ``len(seq)``: logical length, prompt plus generated tokens.
      * ``num_computed``: logical tokens whose KV has been computed. While decoding it is
        ``len(seq) - 1``: the last sampled token is *pending* until the next step writes it.
      * ``num_evicted``: tokens removed by compression; physical = logical - evicted.
    """

    _ids = count()

    def __init__(self, token_ids: list[int], params: SamplingParams, block_size: int,
                 prompt_index: int = 0, sample_index: int = 0, seed: int | None = None):
        self.seq_id = next(Sequence._ids)
        self.prompt_index = prompt_index
        self.sample_index = sample_index
        self.token_ids = list(token_ids)
        self.num_prompt_tokens = len(token_ids)
        self.params = params
        self.block_size = block_size
        self.seed = seed
        self.status = Status.WAITING
        self.block_table: list[int] = []
        self.num_computed = 0
        self.num_evicted = 0
        self.query_slot = -1
        self.num_compressions = 0
        self.num_preemptions = 0
        self.peak_kv_tokens = 0
        self.finish_reason: str | None = None
        self.arrival_time = 0.0
        self.first_token_time: float | None = None
        self.finish_time: float | None = None

    def __len__(self) -> int:
        return len(self.token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids) - self.num_prompt_tokens

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
    def is_compressed(self) -> bool:
        return self.num_compressions > 0

    @property
    def is_finished(self) -> bool:
        return self.status == Status.FINISHED

    def append_token(self, token_id: int) -> None:
        self.token_ids.append(token_id)

    def reset_for_recompute(self) -> None:
        """Preemption by recompute: forget all KV; the tokens are kept."""
        self.status = Status.WAITING
        self.block_table = []
        self.num_computed = 0
        self.num_evicted = 0
        self.query_slot = -1
        self.num_preemptions += 1
