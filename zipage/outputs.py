"""What ``LLM.generate`` returns (vLLM-shaped) and the run statistics."""
from dataclasses import asdict, dataclass, field


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    finish_reason: str  # "stop" | "length"
    metrics: dict = field(default_factory=dict)


@dataclass
class RequestOutput:
    request_id: int
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
    error: str | None = None

    def first(self) -> CompletionOutput:
        """The first completion; a request that did not run says why (its `error`)."""
        if not self.outputs:
            raise ValueError(f"request {self.request_id} has no output: "
                             f"{self.error or 'it did not finish'}")
        return self.outputs[0]

    @property
    def text(self) -> str:
        return self.first().text

    @property
    def token_ids(self) -> list[int]:
        return self.first().token_ids

    @property
    def finish_reason(self) -> str:
        return self.outputs[0].finish_reason if self.outputs else "error"

    @property
    def metrics(self) -> dict:
        return self.first().metrics


@dataclass
class GenerateStats:
    wall_time_s: float = 0.0
    num_prompt_tokens: int = 0
    num_output_tokens: int = 0
    num_steps: int = 0
    peak_running: int = 0
    mean_running: float = 0.0
    num_preemptions: int = 0
    num_compressions: int = 0
    compression_time_s: float = 0.0
    num_kv_blocks: int = 0
    max_concurrency: int = 0
    schedule_time_s: float = 0.0  # host time in the scheduler (incl. post-processing)
    execute_time_s: float = 0.0  # runner time: batch building, forward, sampling, compression
    interrupted: bool = False  # the call raised (Ctrl-C, a failure): counts include the
                               # work of the requests it dropped

    @property
    def output_tokens_per_s(self) -> float:
        return self.num_output_tokens / self.wall_time_s if self.wall_time_s > 0 else 0.0

    def as_dict(self) -> dict:
        return {**asdict(self), "output_tokens_per_s": self.output_tokens_per_s}
