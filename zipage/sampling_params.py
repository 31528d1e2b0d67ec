"""Per-request sampling settings, shaped like vLLM's."""
from dataclasses import dataclass, fields
from numbers import Integral, Real

MAX_SEED = 2**32 - 1  # the sampler hashes the low 32 bits of a sample's seed


def _is_int(x) -> bool:
    return isinstance(x, Integral) and not isinstance(x, bool)


def _is_real(x) -> bool:
    return isinstance(x, Real) and not isinstance(x, bool)


@dataclass
class SamplingParams:
    """How to sample one prompt. ``temperature=0`` means greedy decoding.

    ``seed`` makes sampling reproducible whatever else is in the batch: sample ``i`` of
    ``n`` uses seed ``seed + i``. Without a seed, the engine's seed and the request index
    are used, so a run is still reproducible as a whole. The sampler hashes 32 bits of a
    seed, so ``seed + n - 1`` must lie in [0, 2**32) (a larger one would repeat a smaller).
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
        self._check_types()
        self.stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        self.stop_token_ids = [int(t) for t in self.stop_token_ids or []]
        self.n, self.top_k, self.max_tokens, self.min_tokens = (
            int(self.n), int(self.top_k), int(self.max_tokens), int(self.min_tokens))
        self.temperature, self.top_p, self.min_p = (
            float(self.temperature), float(self.top_p), float(self.min_p))
        if self.seed is not None:
            self.seed = int(self.seed)
        if self.forced_tokens is not None:
            self.forced_tokens = [int(t) for t in self.forced_tokens]
            self.max_tokens = len(self.forced_tokens)
            self.ignore_eos = True
        checks = [
            (self.n >= 1, f"n must be >= 1, got {self.n}"),
            (self.seed is None or 0 <= self.seed and self.seed + self.n - 1 <= MAX_SEED,
             f"seed must be in [0, {MAX_SEED - self.n + 1}] for n={self.n} (sample i uses "
             f"seed + i, and the sampler hashes 32 bits), got {self.seed}"),
            (self.temperature >= 0, f"temperature must be >= 0, got {self.temperature}"),
            (0 < self.top_p <= 1, f"top_p must be in (0, 1], got {self.top_p}"),
            (self.top_k == -1 or self.top_k >= 1, f"top_k must be -1 or >= 1, got {self.top_k}"),
            (0 <= self.min_p <= 1, f"min_p must be in [0, 1], got {self.min_p}"),
            (self.max_tokens >= 1, f"max_tokens must be >= 1, got {self.max_tokens}"),
            (0 <= self.min_tokens <= self.max_tokens, "min_tokens must be in [0, max_tokens]"),
            ("" not in self.stop, "stop contains an empty string, which would match at once; "
                                  "leave it out"),
            (all(t >= 0 for t in self.stop_token_ids), "stop_token_ids must be >= 0"),
            (self.forced_tokens is None or all(t >= 0 for t in self.forced_tokens),
             "forced_tokens must be >= 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    def _check_types(self) -> None:
        """TypeError naming the field, before any comparison could fail obscurely."""
        kinds = {"n": (_is_int, "an int"), "top_k": (_is_int, "an int"),
                 "max_tokens": (_is_int, "an int"), "min_tokens": (_is_int, "an int"),
                 "temperature": (_is_real, "a number"), "top_p": (_is_real, "a number"),
                 "min_p": (_is_real, "a number"),
                 "seed": (lambda x: x is None or _is_int(x), "an int or None"),
                 "ignore_eos": (lambda x: isinstance(x, bool), "a bool"),
                 "skip_special_tokens": (lambda x: isinstance(x, bool), "a bool"),
                 "stop": (lambda x: x is None or isinstance(x, str) or (
                     isinstance(x, (list, tuple)) and all(isinstance(s, str) for s in x)),
                     "a string, a list of strings or None"),
                 "stop_token_ids": (_int_list_or_none, "a list of ints or None"),
                 "forced_tokens": (_int_list_or_none, "a list of ints or None")}
        assert set(kinds) == {f.name for f in fields(self)}
        for name, (ok, kind) in kinds.items():
            value = getattr(self, name)
            if not ok(value):
                raise TypeError(f"SamplingParams.{name} must be {kind}, got {value!r} "
                                f"({type(value).__name__})")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


def _int_list_or_none(x) -> bool:
    return x is None or (isinstance(x, (list, tuple)) and all(_is_int(t) for t in x))
