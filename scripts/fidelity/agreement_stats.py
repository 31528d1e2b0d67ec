"""Answer agreement with Full KV (pure Python, tested on CPU).

Answers are the harness's extracted final answers (strings, None when the model gave none);
two answers agree when the strings are equal. A problem's answers from several samples
(seeds) form its answer distribution; its majority answer is the most frequent one, ties
going to the answer that appeared first in sample order (so it is deterministic).
"""
from collections import Counter

from scripts.fidelity.stats import mean, standard_error


def majority(answers: list) -> object:
    """The most frequent answer; ties -> the one whose first occurrence comes first."""
    if not answers:
        raise ValueError("no answers")
    counts = Counter(answers)
    best = max(counts.values())
    return next(a for a in answers if counts[a] == best)


def overlap(answers_a: list, answers_b: list) -> float:
    """Shared probability mass of two answer distributions (1 - total variation distance)."""
    ca, cb = Counter(answers_a), Counter(answers_b)
    na, nb = len(answers_a), len(answers_b)
    return sum(min(ca[k] / na, cb[k] / nb) for k in ca.keys() & cb.keys())


def fraction(flags: list[bool]) -> dict:
    """Mean of 0/1 flags with its standard error and count."""
    xs = [float(f) for f in flags]
    return dict(mean=mean(xs), se=standard_error(xs), n=len(xs))


def agreement(full: dict, run: dict, problems: list) -> dict:
    """Agreement of `run` with `full` over `problems`.

    full/run: problem id -> list of answers, one per sample (same sample order/seeds).
    With one sample per problem this is greedy agreement; with several, `majority` compares
    majority answers and `overlap` the answer distributions.
    """
    maj = [majority(run[p]) == majority(full[p]) for p in problems]
    return dict(majority=fraction(maj),
                per_sample=fraction([a == majority(full[p]) for p in problems for a in run[p]]),
                overlap=dict(mean=mean([overlap(run[p], full[p]) for p in problems]),
                             se=standard_error([overlap(run[p], full[p]) for p in problems])),
                flags=maj)


def paired_difference(flags_a: list[bool], flags_b: list[bool]) -> dict:
    """Per-problem difference of two methods' agreement flags (a - b): mean and SE."""
    if len(flags_a) != len(flags_b):
        raise ValueError("paired flags must cover the same problems")
    d = [float(a) - float(b) for a, b in zip(flags_a, flags_b)]
    return dict(mean=mean(d), se=standard_error(d), n=len(d))
