"""The answer metrics of a scored run (issue 33), for tasks/score_plan.py: each sample's answer
class (stored in scores.jsonl), maj@k and accuracy by output length (summary.json), and the
agreement with the Full-KV baseline (its `baseline` block).

Tasks without answer classes (code: maj@k is not defined for programs) get maj@k None and no
agreement; accuracy by length is computed for every task.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from tasks.answer_classes import Classes, cross_classes, representatives
from tasks.consensus import answer_agreement, maj_at_k
from tasks.length_bins import accuracy_by_length
from tasks.samples import SCORES, read_jsonl_lenient

NO_AGREEMENT = {"answer_agreement": None, "sample_answer_in_baseline": None}


def answer_classes(task, rows: list[dict], verdicts: list[dict], *, workers: int,
                   timeout: float) -> Classes | None:
    """The task's answer classes of `rows` (None for a task that has none: code)."""
    fn = getattr(task, "answer_classes", None)
    return fn(rows, verdicts, workers=workers, timeout=timeout) if fn else None


def length_bins(scored: list[dict], max_tokens: int) -> dict:
    """accuracy_by_length, or {"error": why} for rows it cannot bin (an output longer than
    max_tokens): the rest of the summary is still written."""
    try:
        return accuracy_by_length(scored, max_tokens)
    except ValueError as e:
        return {"error": str(e)}


@dataclass
class Answers:
    """A run's scored samples and their answer classes (None: the task has none);
    `workers` and `timeout` bound the equivalence checks against the baseline."""
    pairs: list[tuple[dict, dict]]  # (sample row, verdict + its answer_class)
    classes: Classes | None
    workers: int
    timeout: float

    @classmethod
    def of(cls, task, pairs: list[tuple[dict, dict]], *, workers: int,
           timeout: float) -> "Answers":
        """pairs: (sample row, verdict) in scoring order; each verdict gains its sample's
        `answer_class` (int, or None: no answer) where the task has classes."""
        classes = answer_classes(task, [r for r, _ in pairs], [v for _, v in pairs],
                                 workers=workers, timeout=timeout)
        if classes is not None:
            pairs = [(r, {**v, "answer_class": c}) for (r, v), c in zip(pairs, classes.per_row)]
        return cls(pairs, classes, workers, timeout)

    @property
    def scored(self) -> list[dict]:
        return [{**r, **v} for r, v in self.pairs]

    def summary_fields(self, n: int, max_tokens: int) -> dict:
        defined = self.classes is not None
        scored = self.scored
        return {"maj@k": maj_at_k(scored, n) if defined else None,
                "answer_equivalence": self.classes.stats if defined else None,
                "accuracy_by_length": length_bins(scored, max_tokens)}

    def agreement_with_itself(self) -> dict:
        """A Full-KV run is its own baseline: each class maps to itself, nothing compared."""
        if self.classes is None:
            return dict(NO_AGREEMENT)
        same = {pid: list(range(len(reps))) for pid, reps in self.classes.reps.items()}
        scored = self.scored
        return answer_agreement(scored, scored, same)

    def agreement_with(self, base) -> dict:
        """Against the baseline run `base` (its plan), from its scores.jsonl; its rows
        scored before answer classes existed get them here."""
        if self.classes is None:
            return dict(NO_AGREEMENT)
        rows = [r for r in read_jsonl_lenient(os.path.join(base.run_dir, SCORES))
                if r.get("scoring") == base.scoring["digest"]]
        if any("answer_class" not in r for r in rows):
            got = answer_classes(base.task, rows, [{} for _ in rows], workers=self.workers,
                                 timeout=self.timeout)
            rows = [{**r, "answer_class": c} for r, c in zip(rows, got.per_row)]
        cross, stats = cross_classes(self.classes.reps, representatives(rows),
                                     workers=self.workers, timeout=self.timeout)
        return {**answer_agreement(self.scored, rows, cross), "cross_equivalence": stats}
