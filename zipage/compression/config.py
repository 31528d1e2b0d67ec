"""Switches and constants of the eviction score (docs/method.md §6)."""
from dataclasses import dataclass

REDUNDANCY_MODES = ("none", "raw", "lightning")
# "attention": the Zipage score (switches below). Baselines for fidelity studies:
# "recent": keep sinks + the most recent tokens (StreamingLLM-like); "random": random eviction.
SCORE_MODES = ("attention", "recent", "random")


@dataclass(frozen=True)
class CompressionConfig:
    """How Compressed PagedAttention ranks tokens. Defaults: plain window attention score.

    Final score per (layer, request, KV head), top-K kept:
        F = (1 - redundancy_weight) * pooled_score - redundancy_weight * redundancy
    (the paper's lambda = 1 - redundancy_weight; with redundancy "none", F = pooled_score).
    redundancy_weight defaults to 0.2, not the paper's 0.8: with 0.8 the redundancy softmax
    decides the ranking of every token but the heavy hitters, and teacher-forced fidelity on
    SmolLM2 was worse (chosen on tuning texts, confirmed on disjoint test texts:
    results/fidelity_smollm2*.md). `paper()` keeps the published 0.8.
    """

    observation_window: int = 16  # W recent queries scoring the cache; always kept
    use_global_score: bool = False  # S = max(A, global_decay * previous S) on history slots
    global_decay: float = 0.8  # gamma
    use_pooling: bool = False  # max-pool S along the sequence
    pooling_kernel_size: int = 5  # odd window of the max pool
    pool_every_compression: bool = False  # else pool only at a request's first compression
    redundancy: str = "none"  # "none" | "raw" (all pairs) | "lightning" (pairs in a block)
    redundancy_weight: float = 0.2  # weight of the redundancy penalty (1 - lambda)
    redundancy_temperature: float = 0.4  # T in softmax(rho / (T * n))
    redundancy_threshold: float = 0.5  # tau: cosine above which keys count as similar
    num_sink_tokens: int = 0  # first physical tokens always kept
    score: str = "attention"  # "attention" | "recent" | "random" (baselines)

    def __post_init__(self):
        for name in ("use_global_score", "use_pooling", "pool_every_compression"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool")
        for name in ("observation_window", "pooling_kernel_size", "num_sink_tokens"):
            if not isinstance(getattr(self, name), int) or isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be an int")
        if self.observation_window < 1:
            raise ValueError("observation_window must be >= 1")
        if self.pooling_kernel_size < 1 or self.pooling_kernel_size % 2 == 0:
            raise ValueError("pooling_kernel_size must be odd and >= 1")
        if self.num_sink_tokens < 0:
            raise ValueError("num_sink_tokens must be >= 0")
        if self.score not in SCORE_MODES:
            raise ValueError(f"score must be one of {SCORE_MODES}")
        if self.redundancy not in REDUNDANCY_MODES:
            raise ValueError(f"redundancy must be one of {REDUNDANCY_MODES}")
        if not 0.0 <= self.global_decay <= 1.0:
            raise ValueError("global_decay must be in [0, 1]")
        if not 0.0 <= self.redundancy_weight <= 1.0:
            raise ValueError("redundancy_weight must be in [0, 1]")
        if not self.redundancy_temperature > 0.0:
            raise ValueError("redundancy_temperature must be > 0")
        if not -1.0 <= self.redundancy_threshold <= 1.0:
            raise ValueError("redundancy_threshold must be in [-1, 1]")

    @classmethod
    def full_score(cls, **overrides) -> "CompressionConfig":
        """Every term of the Zipage score: global score, first-compression pooling, lightning
        redundancy at our default weight (0.2)."""
        base = dict(use_global_score=True, use_pooling=True, redundancy="lightning")
        return cls(**{**base, **overrides})

    @classmethod
    def paper(cls, **overrides) -> "CompressionConfig":
        """The published Zipage setting: the full score with redundancy weight 0.8 (lambda 0.2)."""
        return cls.full_score(**{"redundancy_weight": 0.8, **overrides})

    @property
    def pooling_size(self) -> int:
        """Effective pooling kernel (1 = no pooling)."""
        return self.pooling_kernel_size if self.use_pooling else 1
