"""Math benchmarks: AMC23, AIME24/25, MATH-500, GSM8K. Each is one MathTask value: where
its data lives, which field holds the question, its prompt and its version."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from tasks import math_grader
from tasks.answer_classes import RULE as CLASSES_RULE, Classes, answer_classes
from tasks.base import INSTRUCTION, HFSource, Problem, Task, check_unique, register
from tasks.data_files import read_hub, read_jsonl
from tasks.pool import map_with_deadline


@dataclass
class MathOptions:
    instruction: str = INSTRUCTION       # appended to every problem (part of the prompt)
    penalize_truncated: bool = True      # outputs cut at max_tokens count as wrong
    thinking: bool = False               # reasoning model: score only after the last </think>


@dataclass
class MathTask(Task):
    question_field: str = "problem"      # the row field holding the statement
    answer_field: str = "answer"         # the gold answer (a non-empty string)
    options: MathOptions = field(default_factory=MathOptions)
    answer_classes_rule: ClassVar[int] = CLASSES_RULE  # part of the scoring identity

    def load(self, data_dir, limit=None, *, data_file=None, hf=None):
        fields = (self.question_field, self.answer_field)
        if data_dir:
            where = self.data_path(data_dir, data_file)
            rows = read_jsonl(where, fields)
        else:
            hf = hf or self.hf
            where = f"{hf.path}@{hf.revision}"
            rows = read_hub(hf, self.name, fields, answer_field=self.answer_field)
        problems = check_unique(self.name, [self.to_problem(r) for r in rows], where)
        return problems[:limit] if limit is not None else problems

    def to_problem(self, row: dict) -> Problem:
        q, a = self.question_field, self.answer_field
        return Problem(id=row["id"], prompt=str(row[q]).strip(), answer=str(row[a]).strip(),
                       meta={k: v for k, v in row.items() if k not in ("id", q, a)})

    def messages(self, problem: Problem) -> list[dict]:
        return [{"role": "user", "content": f"{problem.prompt}\n{self.options.instruction}"}]

    def score(self, rows, problems, *, workers=2, timeout=5.0):
        o = self.options
        items = [{"text": r.get("completion") or "", "finish_reason": r.get("finish_reason", ""),
                  "gold": problems[r["problem_id"]].answer, "timeout": timeout,
                  "penalize_truncated": o.penalize_truncated, "thinking": o.thinking}
                 for r in rows]

        def failed(item, why):
            return {"correct": False, "correct_lenient": False, "extracted_answer": None,
                    "truncated": item["finish_reason"] == "length",
                    "has_boxed": math_grader.last_boxed(item["text"]) is not None, "error": why}

        stall = 3 * timeout + 15
        verdicts = map_with_deadline(
            math_grader.grade, items, workers=workers, stall_s=stall,
            initializer=math_grader.warmup,
            on_timeout=lambda it: failed(it, f"timeout: scoring exceeded {stall:.0f}s"),
            on_error=lambda it, e: failed(it, f"{type(e).__name__}: {e}"[:200]))
        for r, v in zip(rows, verdicts):
            if r.get("error"):  # the engine could not run this request
                v.update(correct=False, correct_lenient=False, error=r["error"])
        return verdicts

    def answer_classes(self, rows, verdicts, *, workers=2, timeout=5.0) -> Classes:
        """Per sample, its final answer's class within its problem by math-verify's
        equivalence (tasks/answer_classes.py), for maj@k and the agreement with Full KV.
        Code tasks have no such method: maj@k is not defined for code."""
        return answer_classes([{**r, **v} for r, v in zip(rows, verdicts)],
                              penalize_truncated=self.options.penalize_truncated,
                              workers=workers, timeout=timeout)

    def grader(self) -> str:
        from importlib.metadata import PackageNotFoundError, version
        try:
            return f"math-verify {version('math-verify')}"
        except PackageNotFoundError:
            return "math-verify"

    def summary_extras(self, rows, verdicts, problems):
        checked = [v for v in verdicts if "strict_int_match" in v]
        # Integer golds: math-verify and a plain integer comparison of the last box should agree.
        disagree = sum(1 for v in checked if v["strict_int_match"] != v["correct_lenient"])
        return {"int_crosscheck_disagreements": disagree} if checked else {}


# Hub copies: used only without data_dir, at the commit task.hf.revision names (tasks/hub_revision.py).
register(MathTask("amc23", version=1, hf=HFSource("math-ai/amc23", columns={"question": "problem"})))
register(MathTask("aime24", version=1, hf=HFSource("math-ai/aime24", columns={"solution": "answer"},
                                                   answer_rule="boxed")))
register(MathTask("aime25", version=1, hf=HFSource("math-ai/aime25")))
register(MathTask("math500", version=1, hf=HFSource("HuggingFaceH4/MATH-500",
                                                    columns={"unique_id": "id"})))
register(MathTask("gsm8k", version=1, question_field="question",
                  hf=HFSource("openai/gsm8k", "main", answer_rule="after_hashes")))
