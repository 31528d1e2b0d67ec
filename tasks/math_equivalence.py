"""Sort answer strings into classes of equivalent answers with math-verify. Runs inside a
worker process (math-verify's timeouts use signal.alarm, which only works in a process's
main thread), so it imports no engine code.

The rule, greedy in the order the answers are given (sample-index order): an answer joins
the class whose representative is the same string, else the first class whose representative
`rep` satisfies verify(rep, answer); otherwise it starts a new class and is its representative. math-verify's verify is neither always symmetric nor
always transitive, so the direction is fixed: the representative is always the reference
("gold") side, and the result depends on the order of the answers, which is stated.
Two integers ("025" and "25", "7" and "8") are compared by value in the caller's process:
math-verify would say the same, and most math answers are integers, so most runs need no
worker at all (tasks/answer_classes.needs_comparison).
"""
from __future__ import annotations

import re
import time

from tasks.math_grader import parse_answer

_INTEGER = re.compile(r"-?\d+")


def settled(rep: str, answer: str) -> bool | None:
    """Whether `answer` equals `rep` when that needs no math-verify (identical strings, two
    integers by value); None when math-verify must decide."""
    if rep == answer:
        return True
    if _INTEGER.fullmatch(rep) and _INTEGER.fullmatch(answer):
        return int(rep) == int(answer)
    return None


class _Comparer:
    """verify(rep, answer) with each string parsed once, every parse and comparison under
    `timeout` seconds and the whole item under `budget_s` seconds; a comparison that times
    out, or that the budget leaves unmade, counts as "not equal" and is counted."""

    def __init__(self, timeout: int, budget_s: float):
        self.timeout, self.deadline = timeout, time.monotonic() + budget_s
        self.parsed: dict[str, list] = {}
        self.stats = {"comparisons": 0, "timeouts": 0, "skipped": 0}

    def _parse(self, text: str) -> list:
        if text not in self.parsed:
            t0 = time.monotonic()
            self.parsed[text] = parse_answer(text, self.timeout)
            if not self.parsed[text] and time.monotonic() - t0 >= 0.9 * self.timeout:
                self.stats["timeouts"] += 1
        return self.parsed[text]

    def equal(self, rep: str, answer: str) -> bool:
        from math_verify import verify
        known = settled(rep, answer)
        if known is not None:
            return known
        if time.monotonic() > self.deadline:
            self.stats["skipped"] += 1
            return False
        gold, pred = self._parse(rep), self._parse(answer)
        if not gold or not pred:  # unparsable: equal only to the identical string
            return False
        self.stats["comparisons"] += 1
        t0 = time.monotonic()
        ok = bool(verify(gold, pred, timeout_seconds=self.timeout))
        if not ok and time.monotonic() - t0 >= 0.9 * self.timeout:
            self.stats["timeouts"] += 1
        return ok


def classify(item: dict) -> dict:
    """One problem's answers -> their classes.

    item: known (representatives fixed beforehand, e.g. the Full-KV run's; [] to cluster from
    scratch), answers (distinct strings, in sample-index order), grow (may an answer that
    matches no representative start a new class?), timeout (s per parse and per comparison),
    budget_s (s for the whole item).
    Returns classes (per answer, the index of its class in reps, or None when it matches none
    and grow is false), reps (known + the new representatives), comparisons, timeouts and
    skipped (comparisons left unmade once the budget ran out).
    """
    timeout = max(1, int(round(item.get("timeout", 5))))
    compare = _Comparer(timeout, item.get("budget_s", 60.0))
    return {**cluster(item, compare.equal), **compare.stats}


def without_verify(item: dict) -> dict:
    """classify's answer when no worker ran the item (none was needed, or it stalled or
    crashed): classes by what `settled` decides (string identity, integer value), nothing
    else compared."""
    return {**cluster(item, lambda rep, answer: bool(settled(rep, answer))), "comparisons": 0,
            "timeouts": 0, "skipped": 0}


def cluster(item: dict, equal) -> dict:
    """The greedy rule of the module docstring, with `equal(rep, answer)` as the test."""
    reps = list(item["known"])
    classes: list[int | None] = []
    for answer in item["answers"]:
        found = reps.index(answer) if answer in reps else next(
            (i for i, rep in enumerate(reps) if equal(rep, answer)), None)
        if found is None and item["grow"]:
            reps.append(answer)
            found = len(reps) - 1
        classes.append(found)
    return {"classes": classes, "reps": reps}
