"""Which samples of a problem gave the same final answer, by math-verify's equivalence ("1/2",
"0.5" and "\\frac{1}{2}" are one answer), and which of a run's answers the Full-KV baseline
also gave. The comparisons run in worker processes (tasks/math_equivalence.py) through the
scorer's pool with its deadline, one item per problem.

A sample votes (has an answer) when it has an extracted answer, the engine did not reject it,
and it was not cut at max_tokens while truncation is penalized (its "answer" is then a
number from unfinished reasoning, and pass@1 already counts it wrong). Its `answer_class` is
an int within its problem, numbered in the order of the classes' first samples; None for a
sample that does not vote.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from tasks import math_equivalence, math_grader
from tasks.pool import map_with_deadline

# The rule that sorts answers into classes: part of the scoring identity of the tasks that have
# answer classes (tasks/scoring_identity.py). Bump it when a class could change for the same
# answers: runs and their baselines are then scored again, never compared across rules.
RULE = 1
BUDGET_S = 60.0  # one problem's comparisons; past it, only strings and integers are compared


@dataclass
class Classes:
    per_row: list        # per input row, its answer class (int) or None
    reps: dict           # problem id -> representative answer string per class
    # comparisons, timeouts, skipped, failed_problems (their classes: strings and integers only)
    stats: dict = field(default_factory=dict)


def voting_answer(row: dict, penalize_truncated: bool = True) -> str | None:
    """The answer string a scored sample votes with, or None (see the module docstring).
    row: a sample row merged with its verdict (or a scores.jsonl row)."""
    answer = (row.get("extracted_answer") or "").strip()
    if not answer or row.get("finish_reason") == "error":
        return None
    if penalize_truncated and (row.get("truncated") or row.get("finish_reason") == "length"):
        return None
    return answer


def needs_comparison(item: dict) -> bool:
    """Whether classify would call verify on the item (otherwise strings and integer values
    settle it, and no worker is started: a greedy run's single answers, integer answers, a
    run's cross map with itself)."""
    undecided = []

    def equal(rep, answer):
        known = math_equivalence.settled(rep, answer)
        undecided.append(known is None)
        return bool(known)
    math_equivalence.cluster(item, equal)
    return any(undecided)


def _run(items: list[dict], workers: int, timeout: float) -> tuple[list[dict], dict]:
    stats = {"comparisons": 0, "timeouts": 0, "skipped": 0, "failed_problems": 0}
    out = [math_equivalence.without_verify(it) for it in items]
    todo = [i for i, it in enumerate(items) if needs_comparison(it)]
    if not todo:
        return out, stats
    failures = []

    def failed(item, why):
        failures.append(why)
        return math_equivalence.without_verify(item)

    # The budget is checked before each comparison: the last one may still parse both answers
    # and try verify's 2 x 2 pairs of parsed forms, each under `timeout`.
    stall = BUDGET_S + 6 * timeout + 15
    done = map_with_deadline(
        math_equivalence.classify, [items[i] for i in todo], workers=workers, stall_s=stall,
        initializer=math_grader.warmup,
        on_timeout=lambda it: failed(it, "stalled"),
        on_error=lambda it, e: failed(it, f"{type(e).__name__}: {e}"[:200]))
    for i, o in zip(todo, done):
        out[i] = o
        for k in ("comparisons", "timeouts", "skipped"):
            stats[k] += o[k]
    stats["failed_problems"] = len(failures)
    if failures:
        stats["first_failure"] = failures[0]
    return out, stats


def answer_classes(rows: list[dict], *, penalize_truncated: bool = True, workers: int = 2,
                   timeout: float = 5.0) -> Classes:
    """Greedy classes per problem (tasks/math_equivalence.py states the rule), in sample-index
    order. Identical strings and equal integers are one class without math-verify; only
    problems with other distinct answers go to the workers. rows: scored samples (problem_id, sample_index, extracted_answer, ...)."""
    order = sorted(range(len(rows)), key=lambda i: (str(rows[i]["problem_id"]),
                                                   rows[i]["sample_index"]))
    answers: dict = defaultdict(list)  # problem id -> distinct answers, first-sample order
    for i in order:
        a = voting_answer(rows[i], penalize_truncated)
        if a is not None and a not in answers[rows[i]["problem_id"]]:
            answers[rows[i]["problem_id"]].append(a)
    pids = list(answers)
    items = [{"known": [], "answers": answers[p], "grow": True, "timeout": timeout,
              "budget_s": BUDGET_S} for p in pids]
    out, stats = _run(items, workers, timeout)
    class_of = {p: dict(zip(answers[p], o["classes"])) for p, o in zip(pids, out)}
    per_row = []
    for r in rows:
        a = voting_answer(r, penalize_truncated)
        per_row.append(None if a is None else class_of[r["problem_id"]][a])
    return Classes(per_row, {p: o["reps"] for p, o in zip(pids, out)}, stats)


def representatives(rows: list[dict]) -> dict:
    """problem id -> per class, the answer of its first sample; from rows that carry
    answer_class and extracted_answer (a scores.jsonl, e.g. the baseline's)."""
    first: dict = defaultdict(dict)  # problem id -> class -> (sample index, answer)
    for r in rows:
        c = r.get("answer_class")
        if c is None:
            continue
        seen = first[r["problem_id"]].get(c)
        if seen is None or r["sample_index"] < seen[0]:
            first[r["problem_id"]][c] = (r["sample_index"], (r["extracted_answer"] or "").strip())
    reps = {}
    for pid, by_class in first.items():
        if sorted(by_class) != list(range(len(by_class))):
            raise ValueError(f"problem {pid}: answer classes {sorted(by_class)} are not "
                             f"numbered 0..{len(by_class) - 1}")
        reps[pid] = [by_class[c][1] for c in range(len(by_class))]
    return reps


def cross_classes(run_reps: dict, base_reps: dict, *, workers: int = 2,
                  timeout: float = 5.0) -> tuple[dict, dict]:
    """Per problem both runs answered, per run class the baseline class with the same
    representative string, else the first whose representative verifies equal to the run's
    (verify(baseline rep, run rep)), else None. Returns (problem id -> list indexed by run
    class, stats)."""
    pids = [p for p in run_reps if base_reps.get(p)]
    items = [{"known": base_reps[p], "answers": run_reps[p], "grow": False, "timeout": timeout,
              "budget_s": BUDGET_S} for p in pids]
    out, stats = _run(items, workers, timeout)
    return {p: o["classes"] for p, o in zip(pids, out)}, stats
