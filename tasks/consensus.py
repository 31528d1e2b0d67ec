"""Majority-vote metrics over answer classes (tasks/answer_classes.py): maj@k and agreement
with the Full-KV baseline. Pure functions over scored rows with `problem_id`, `sample_index`,
`answer_class` (int or None: no answer) and `correct`.

Majority of a set of samples: the class with the most members; a tie goes to the class whose
first member has the lowest sample index; samples without an answer never form the majority,
and a set where no sample answered has no majority (None).

maj@k, estimator: a problem's samples are cut into disjoint groups by sample index
([0..k-1], [k..2k-1], ...; only groups with all k samples count); a group is right when its
majority class is right, judged by the verdict (`correct`) of that class's first member in the
group (its members are equivalent answers to one gold); a problem scores the mean over its
groups; maj@k is the mean over problems with its standard error across problems, like pass@1.
A group of one is right exactly when its sample is, so maj@1 == pass@1.
"""
from __future__ import annotations

import math
from collections import Counter, defaultdict


def mean_stderr(values: list[float]) -> tuple[float | None, float | None]:
    """Mean and its standard error (sample standard deviation / sqrt(count))."""
    if not values:
        return None, None
    m = sum(values) / len(values)
    if len(values) < 2:
        return m, 0.0
    var = sum((v - m) ** 2 for v in values) / (len(values) - 1)
    return m, math.sqrt(var / len(values))


def k_values(n: int) -> list[int]:
    """1, 2, 4, ... (the powers of two that divide n), and n itself."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    ks, k = [], 1
    while k <= n and n % k == 0:
        ks.append(k)
        k *= 2
    return ks if ks[-1] == n else ks + [n]


def majority_class(classes: list) -> int | None:
    """classes: answer classes in sample-index order (None: no answer)."""
    counts = Counter(c for c in classes if c is not None)
    if not counts:
        return None
    best = max(counts.values())
    return next(c for c in classes if c is not None and counts[c] == best)


def by_problem(rows: list[dict]) -> dict:
    """problem id -> {sample index: row}; a repeated (problem, sample index) is an error."""
    out: dict = defaultdict(dict)
    for r in rows:
        if r["sample_index"] in out[r["problem_id"]]:
            raise ValueError(f"problem {r['problem_id']}: sample {r['sample_index']} appears twice")
        out[r["problem_id"]][r["sample_index"]] = r
    return out


def group_is_right(group: list[dict]) -> bool:
    """group: rows in sample-index order."""
    best = majority_class([r.get("answer_class") for r in group])
    return best is not None and bool(next(r for r in group if r.get("answer_class") == best)
                                     .get("correct"))


def maj_at_k(rows: list[dict], n: int) -> dict:
    """{"k": {"mean", "stderr", "problems"}} for every k of k_values(n); "problems" counts
    those with at least one full group of k samples."""
    problems = by_problem(rows)
    out = {}
    for k in k_values(n):
        scores = []
        for samples in problems.values():
            groups = [[samples.get(i) for i in range(g * k, (g + 1) * k)] for g in range(n // k)]
            right = [group_is_right(g) for g in groups if None not in g]
            if right:
                scores.append(sum(right) / len(right))
        m, se = mean_stderr(scores)
        out[str(k)] = {"mean": m, "stderr": se, "problems": len(scores)}
    return out


def _classes(samples: dict) -> list:
    return [samples[i].get("answer_class") for i in sorted(samples)]


def _cross_of(cross: dict, pid, classes: list, base_answered: bool) -> list:
    """The run's classes -> baseline classes for one problem, checked against the run."""
    answered = [c for c in classes if c is not None]
    if not answered or not base_answered:
        return [None] * (max(answered, default=-1) + 1)  # nothing to be equivalent to
    to_base = cross.get(pid)
    if to_base is None or max(answered) >= len(to_base):
        have = "no entry" if to_base is None else f"{len(to_base)} run classes"
        raise ValueError(f"problem {pid}: the cross map has {have}, the run has "
                         f"{max(answered) + 1}")
    return to_base


def answer_agreement(run_rows: list[dict], base_rows: list[dict], cross: dict) -> dict:
    """Agreement of a run with its Full-KV baseline over the problems both have samples of.

    cross: problem id -> per run class, the equivalent baseline class or None
    (tasks/answer_classes.cross_classes; problems where either run has no answer may be absent).
    A problem agrees when the run's majority answer (over all its samples) is equivalent to
    the baseline's, or when neither run has an answer (compression changed nothing: identical
    completions always agree, and a Full-KV run agrees with itself); a problem only one of
    them answered disagrees. Both kinds are counted (`unanswered_by_both`, `unanswered_by_one`).
    sample_answer_in_baseline: of the run's samples that have an answer, the fraction whose
    answer is equivalent to one of the baseline's answers to that problem (None when no sample
    has an answer; unanswered samples show in other metrics).
    """
    run, base = by_problem(run_rows), by_problem(base_rows)
    agree, answered, in_base = [], 0, 0
    unanswered = {"unanswered_by_both": 0, "unanswered_by_one": 0}
    for pid in (p for p in run if p in base):
        classes = _classes(run[pid])
        mine, theirs = majority_class(classes), majority_class(_classes(base[pid]))
        to_base = _cross_of(cross, pid, classes, theirs is not None)
        if mine is None or theirs is None:
            both = mine is None and theirs is None
            unanswered["unanswered_by_both" if both else "unanswered_by_one"] += 1
            agree.append(float(both))
        else:
            agree.append(float(to_base[mine] == theirs))
        answered += sum(1 for c in classes if c is not None)
        in_base += sum(1 for c in classes if c is not None and to_base[c] is not None)
    m, se = mean_stderr(agree)
    return {"answer_agreement": {"mean": m, "stderr": se, "problems": len(agree), **unanswered},
            "sample_answer_in_baseline": in_base / answered if answered else None}
