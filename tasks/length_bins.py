"""Accuracy by output length: where compression starts to cost accuracy (on long reasoning,
where eviction happens). Samples are binned by `completion_tokens` into fixed-width bins over
[0, max_tokens]: the edges depend only on max_tokens, so a run and its Full-KV baseline (same
max_tokens) share them. Bins are [lo, hi) except the last, [lo, max_tokens], which holds the
samples cut at max_tokens. Every sample is counted in exactly one bin (engine-rejected
samples, 0 tokens, in the first); per bin, accuracy = correct / samples (a fraction of
samples: a bin mixes problems), None for an empty bin.
"""
from __future__ import annotations

BINS = 4


def length_edges(max_tokens: int, bins: int = BINS) -> list[int]:
    """bins + 1 integer edges from 0 to max_tokens (fewer bins when max_tokens < bins)."""
    if max_tokens < 1 or bins < 1:
        raise ValueError(f"max_tokens and bins must be at least 1, got {max_tokens} and {bins}")
    bins = min(bins, max_tokens)
    return [i * max_tokens // bins for i in range(bins + 1)]


def bin_of(tokens: int, edges: list[int]) -> int:
    """The bin holding an output of `tokens` tokens."""
    if not 0 <= tokens <= edges[-1]:
        raise ValueError(f"an output of {tokens} tokens is outside [0, {edges[-1]}]")
    return next((i for i in range(len(edges) - 2) if tokens < edges[i + 1]), len(edges) - 2)


def accuracy_by_length(rows: list[dict], max_tokens: int, bins: int = BINS) -> dict:
    """{"edges": [...], "bins": [{"lo", "hi", "samples", "correct", "accuracy"}, ...]}.
    rows: scored samples with completion_tokens and correct."""
    edges = length_edges(max_tokens, bins)
    out = [{"lo": lo, "hi": hi, "samples": 0, "correct": 0, "accuracy": None}
           for lo, hi in zip(edges, edges[1:])]
    for r in rows:
        tokens = r.get("completion_tokens")
        if not isinstance(tokens, int):
            raise ValueError(f"problem {r.get('problem_id')} sample {r.get('sample_index')}: "
                             f"completion_tokens is {tokens!r}, not a token count")
        b = out[bin_of(tokens, edges)]
        b["samples"] += 1
        b["correct"] += bool(r.get("correct"))
    for b in out:
        b["accuracy"] = b["correct"] / b["samples"] if b["samples"] else None
    return {"edges": edges, "bins": out}
