"""Switches and constants of the eviction score (docs/method.md §6)."""
import math
from dataclasses import dataclass

REDUNDANCY_MODES = ("none", "raw", "lightning")
# "attention": the Zipage score (switches below). Baselines for fidelity studies:
# "recent": keep sinks + the most recent tokens (StreamingLLM-like); "random": random eviction.
SCORE_MODES = ("attention", "recent", "random")
# The published methods keep no sinks and no recent share beyond their window.
NO_RECENCY = dict(num_sink_tokens=0, recent_ratio=0.0)
# Window attention alone: every other term of the score off. Every preset that is not the
# published Zipage score starts from this, so it never inherits a term of the default.
ATTENTION_ONLY = dict(use_global_score=False, use_pooling=False, pool_every_compression=False,
                      redundancy="none", **NO_RECENCY)
GLOBAL_MODES = ("max", "sum")  # S = max(A, decay * SC) (Zipage, G-KV) | A + decay * SC (H2O)
POOLING_MODES = ("max", "avg")  # avg: SnapKV's official pooling (zero padding, / kernel)
NORMALIZATIONS = ("none", "max")  # max: A / max A and R / max R per head (G-KV)


@dataclass(frozen=True)
class CompressionConfig:
    """How Compressed PagedAttention ranks tokens. Defaults: the published Zipage score
    (docs/method.md §6; the reference's scripts/mathbench.sh), what `engine=zipage` and
    `LLM(model, budget=B)` run: window attention (W 16), the decayed global score (gamma 0.8),
    max pooling (kernel 5) at a request's first compression, lightning redundancy (T 0.4,
    tau 0.5) at weight 0.8 (the paper's lambda 0.2), no sink tokens. `attn_recent()` is the
    variant tuned on SmolLM2 (docs/fidelity.md); the other classmethods are comparison presets.

    Final score per (layer, request, KV head), top-K kept:
        F = (1 - redundancy_weight) * pooled_score - redundancy_weight * redundancy
    (the paper's lambda = 1 - redundancy_weight; with redundancy "none", F = pooled_score).
    """

    observation_window: int = 16  # W recent queries scoring the cache; always kept
    use_global_score: bool = True  # S = max(A, global_decay * previous S) on history slots
    global_decay: float = 0.8  # gamma
    use_pooling: bool = True  # max-pool S along the sequence
    pooling_kernel_size: int = 5  # odd window of the max pool
    pool_every_compression: bool = False  # else pool only at a request's first compression
    redundancy: str = "lightning"  # "none" | "raw" (all pairs) | "lightning" (pairs in a block)
    redundancy_weight: float = 0.8  # weight of the redundancy penalty (1 - lambda)
    redundancy_temperature: float = 0.4  # T in softmax(rho / (T * n))
    redundancy_threshold: float = 0.5  # tau: cosine above which keys count as similar
    num_sink_tokens: int = 0  # first physical tokens always kept
    score: str = "attention"  # "attention" | "recent" | "random" (baselines)
    # Switches of the comparison presets (docs/method.md §14); the defaults leave the score
    # above unchanged.
    global_mode: str = "max"  # "max" | "sum": how the global score folds in its history
    pooling_mode: str = "max"  # "max" | "avg"
    score_normalization: str = "none"  # "none" | "max"
    recent_ratio: float = 0.0  # keep the most recent ceil(ratio * kept) tokens as well
    compress_prompt_only: bool = False  # compress once, right after prefill (SnapKV)

    def __post_init__(self):
        for name in ("use_global_score", "use_pooling", "pool_every_compression",
                     "compress_prompt_only"):
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
        for name, valid in (("global_mode", GLOBAL_MODES), ("pooling_mode", POOLING_MODES),
                            ("score_normalization", NORMALIZATIONS)):
            if getattr(self, name) not in valid:
                raise ValueError(f"{name} must be one of {valid}")
        if not 0.0 <= self.recent_ratio < 1.0:
            raise ValueError("recent_ratio must be in [0, 1)")
        if self.score != "attention" and (self.global_mode != "max" or self.pooling_mode != "max"
                                          or self.score_normalization != "none"):
            raise ValueError("global_mode, pooling_mode and score_normalization apply to "
                             "score='attention' only")
        if not 0.0 <= self.global_decay <= 1.0:
            raise ValueError("global_decay must be in [0, 1]")
        if not 0.0 <= self.redundancy_weight <= 1.0:
            raise ValueError("redundancy_weight must be in [0, 1]")
        if not self.redundancy_temperature > 0.0:
            raise ValueError("redundancy_temperature must be > 0")
        if not -1.0 <= self.redundancy_threshold <= 1.0:
            raise ValueError("redundancy_threshold must be in [-1, 1]")

    @classmethod
    def paper(cls, **overrides) -> "CompressionConfig":
        """The published Zipage setting: the defaults (redundancy weight 0.8, lambda 0.2)."""
        return cls(**overrides)

    @classmethod
    def full_score(cls, **overrides) -> "CompressionConfig":
        """Every term of the Zipage score at redundancy weight 0.2 (the best weight at block
        16 on SmolLM2, docs/fidelity.md; the paper's is 0.8)."""
        return cls(**{"redundancy_weight": 0.2, **overrides})

    @classmethod
    def attention_only(cls, **overrides) -> "CompressionConfig":
        """Window attention alone: no global score, pooling, redundancy, sinks or recent share."""
        return cls(**{**ATTENTION_ONLY, **overrides})

    @classmethod
    def attn_recent(cls, **overrides) -> "CompressionConfig":
        """The variant tuned on SmolLM2 text (engine=zipage_attn_recent): window attention,
        the 4 first tokens and the most recent quarter of the kept tokens always kept."""
        return cls.attention_only(**{"num_sink_tokens": 4, "recent_ratio": 0.25, **overrides})

    # -- comparison methods as presets (docs/method.md §14) --------------------------------
    @classmethod
    def rkv(cls, **overrides) -> "CompressionConfig":
        """R-KV (Cai et al. 2025): lambda * pooled window attention - (1 - lambda) * raw
        redundancy, lambda 0.1 (weight 0.9), window 8, max pool 7 at every compression,
        redundancy softmax without temperature (T = 1), threshold 0.5."""
        base = dict(observation_window=8, use_pooling=True, pooling_kernel_size=7,
                    pool_every_compression=True, redundancy="raw", redundancy_weight=0.9,
                    redundancy_temperature=1.0, redundancy_threshold=0.5)
        return cls.attention_only(**{**base, **overrides})

    @classmethod
    def gkv(cls, **overrides) -> "CompressionConfig":
        """G-KV (Liao et al. 2025): window attention (W 16) normalised by its max, decayed
        global max score (alpha 0.8), minus raw redundancy normalised by its max, lambda 0.5."""
        base = dict(observation_window=16, use_global_score=True, global_decay=0.8,
                    score_normalization="max", redundancy="raw", redundancy_weight=0.5,
                    redundancy_temperature=1.0, redundancy_threshold=0.5)
        return cls.attention_only(**{**base, **overrides})

    @classmethod
    def snapkv_decode(cls, **overrides) -> "CompressionConfig":
        """SnapKV's score (Li et al. 2024: window 32, avg pool 5) at every compression."""
        base = dict(observation_window=32, use_pooling=True, pooling_kernel_size=5,
                    pooling_mode="avg", pool_every_compression=True)
        return cls.attention_only(**{**base, **overrides})

    @classmethod
    def snapkv(cls, **overrides) -> "CompressionConfig":
        """SnapKV as published: its score, applied once to a prompt longer than the cap right
        after prefill; no eviction while decoding (memory grows with the output)."""
        return cls.snapkv_decode(**{"compress_prompt_only": True, **overrides})

    @classmethod
    def streaming_llm(cls, **overrides) -> "CompressionConfig":
        """StreamingLLM (Xiao et al. 2024): 4 attention sinks + the most recent tokens."""
        return cls.attention_only(**{"score": "recent", "num_sink_tokens": 4, **overrides})

    @classmethod
    def h2o(cls, **overrides) -> "CompressionConfig":
        """H2O-style (Zhang et al. 2023): half the kept tokens are the most recent, half the
        heavy hitters by attention accumulated (summed, no decay) over compressions."""
        base = dict(use_global_score=True, global_mode="sum", global_decay=1.0, recent_ratio=0.5)
        return cls.attention_only(**{**base, **overrides})

    def forced_recent(self, num_keep: int) -> int:
        """Most recent physical tokens always kept: the window, or recent_ratio of the kept."""
        return max(self.observation_window, math.ceil(self.recent_ratio * num_keep))

    @property
    def pooling_size(self) -> int:
        """Effective pooling kernel (1 = no pooling)."""
        return self.pooling_kernel_size if self.use_pooling else 1
