"""Per-request sampling settings, shaped like vLLM's."""
from dataclasses import dataclass, field


@dataclass
class SamplingParams:
    """How to sample one prompt. ``temperature=0`` means greedy decoding.

    ``seed`` makes sampling reproducible whatever else is in the batch: sample ``i`` of
    ``n`` uses seed ``seed + i``. Without a seed, the engine's seed and the request index
    are used, so a run is still reproducible as a whole.
    """

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    min_p: float = 0.0
    seed: int | None = None
    max_tokens: int = 16
    min_tokens: int = 0  # EOS and stop_token_ids are masked until this many tokens exist
    stop: list[str] | str | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    # Teacher forcing (fidelity measurements): emit these tokens instead of sampling and
    # record, per token, its log-probability and whether greedy would have chosen it.
    forced_tokens: list[int] | None = None

    def __post_init__(self):
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        self.stop = list(self.stop or [])
        self.stop_token_ids = list(self.stop_token_ids or [])
        if self.forced_tokens is not None:
            self.forced_tokens = [int(t) for t in self.forced_tokens]
            self.max_tokens = len(self.forced_tokens)
            self.ignore_eos = True
        checks = [
            (self.n >= 1, f"n must be >= 1, got {self.n}"),
            (self.temperature >= 0, f"temperature must be >= 0, got {self.temperature}"),
            (0 < self.top_p <= 1, f"top_p must be in (0, 1], got {self.top_p}"),
            (self.top_k == -1 or self.top_k >= 1, f"top_k must be -1 or >= 1, got {self.top_k}"),
            (0 <= self.min_p <= 1, f"min_p must be in [0, 1], got {self.min_p}"),
            (self.max_tokens >= 1, f"max_tokens must be >= 1, got {self.max_tokens}"),
            (0 <= self.min_tokens <= self.max_tokens, "min_tokens must be in [0, max_tokens]"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0
