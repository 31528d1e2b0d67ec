"""Output lengths of a simulated workload: fixed, a capped lognormal with a given mean, or
replayed from a harness run's samples.jsonl (``completion_tokens`` of every sample).

The capped lognormal: L = min(cap, max(1, round(X))) with ln X ~ Normal(mu, sigma^2), mu
solved so that E[min(cap, X)] equals the asked mean. The cap holds a point mass: the samples
that hit ``max_tokens`` (reasoning runs truncate some at 32,768). sigma = 0.6 by default, an
assumption (a coefficient of variation of about 0.66 before the cap), not a fit; replay a
real run's lengths to use measured ones.
"""
import json
import math
import random
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist

_PHI = NormalDist().cdf


def capped_lognormal_mean(mu: float, sigma: float, cap: float) -> float:
    """E[min(cap, X)], ln X ~ N(mu, sigma^2)."""
    z = (math.log(cap) - mu) / sigma
    return math.exp(mu + sigma ** 2 / 2) * _PHI(z - sigma) + cap * (1 - _PHI(z))


@dataclass(frozen=True)
class Fixed:
    length: int

    def __post_init__(self):
        if self.length < 1:
            raise ValueError(f"output length must be >= 1, got {self.length}")

    def draw(self, n: int, seed: int = 0) -> list[int]:
        return [self.length] * n

    def describe(self) -> dict:
        return {"kind": "fixed", "length": self.length}


@dataclass(frozen=True)
class CappedLognormal:
    mean: float
    cap: int
    sigma: float = 0.6

    def __post_init__(self):
        if not 1 <= self.mean < self.cap:
            raise ValueError(f"mean output length must be in [1, cap={self.cap}), got {self.mean}")
        if self.sigma <= 0:
            raise ValueError(f"sigma must be > 0, got {self.sigma}")

    @property
    def mu(self) -> float:
        lo, hi = -10.0, math.log(self.cap) + 10 * self.sigma + 10
        for _ in range(200):  # the capped mean increases with mu
            mid = (lo + hi) / 2
            below = capped_lognormal_mean(mid, self.sigma, self.cap) < self.mean
            lo, hi = (mid, hi) if below else (lo, mid)
        return (lo + hi) / 2

    def draw(self, n: int, seed: int = 0) -> list[int]:
        rng, mu = random.Random(seed), self.mu
        return [min(self.cap, max(1, round(rng.lognormvariate(mu, self.sigma)))) for _ in range(n)]

    def describe(self) -> dict:
        return {"kind": "capped_lognormal", "mean": self.mean, "cap": self.cap,
                "sigma": self.sigma, "mu": self.mu,
                "fraction_at_cap": 1 - _PHI((math.log(self.cap) - self.mu) / self.sigma)}


@dataclass(frozen=True)
class ReplayedSample:
    problem_id: str
    prompt_tokens: int
    completion_tokens: int


def read_samples(path: str) -> list[ReplayedSample]:
    """Samples of a harness run (samples.jsonl), in file order; failed samples are skipped.
    A malformed line is an error naming the line."""
    out = []
    for i, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if row.get("finish_reason") == "error":
                continue
            sample = ReplayedSample(str(row["problem_id"]), int(row["prompt_tokens"]),
                                    int(row["completion_tokens"]))
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}:{i}: not a harness sample row ({e.__class__.__name__}: "
                             f"{e}); need problem_id, prompt_tokens, completion_tokens") from None
        if sample.completion_tokens >= 1:
            out.append(sample)
    if not out:
        raise ValueError(f"{path}: no completed samples to replay")
    return out


@dataclass(frozen=True)
class Replay:
    """Lengths of a harness run, in its order (prompt lengths too: see ``samples``)."""
    path: str

    @property
    def samples(self) -> list[ReplayedSample]:
        return read_samples(self.path)

    def draw(self, n: int, seed: int = 0) -> list[int]:
        lengths = [s.completion_tokens for s in self.samples]
        if n != len(lengths):
            raise ValueError(f"{self.path} has {len(lengths)} samples, {n} asked")
        return lengths

    def describe(self) -> dict:
        lengths = [s.completion_tokens for s in self.samples]
        return {"kind": "replay", "path": self.path, "samples": len(lengths),
                "mean": sum(lengths) / len(lengths), "max": max(lengths)}


def summary(lengths: list[int]) -> dict:
    s = sorted(lengths)
    return {"mean": sum(s) / len(s), "median": s[len(s) // 2], "min": s[0], "max": s[-1]}
