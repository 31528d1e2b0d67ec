"""Math benchmarks: AMC23, AIME24/25, MATH-500, GSM8K (answers are strings)."""
from __future__ import annotations

from tasks.base import INSTRUCTION, Problem, Task, register
from tasks.pool import map_with_deadline
from tasks import math_grader


class MathTask(Task):
    question_field = "problem"

    @property
    def required_fields(self) -> tuple[str, ...]:  # type: ignore[override]
        return (self.question_field, "answer")

    def to_problem(self, row: dict) -> Problem:
        extra = {k: v for k, v in row.items() if k not in ("id", self.question_field, "answer")}
        return Problem(id=row["id"], prompt=str(row[self.question_field]).strip(),
                       answer=str(row["answer"]).strip(), meta=extra)

    def messages(self, problem: Problem) -> list[dict]:
        instruction = self.options.get("instruction", INSTRUCTION)
        return [{"role": "user", "content": f"{problem.prompt}\n{instruction}"}]

    def score(self, rows, problems, *, workers=2, timeout=5.0):
        penalize = bool(self.options.get("penalize_truncated", True))
        thinking = bool(self.options.get("thinking", False))
        items = [{"text": r.get("completion") or "", "finish_reason": r.get("finish_reason", ""),
                  "gold": problems[r["problem_id"]].answer, "timeout": timeout,
                  "penalize_truncated": penalize, "thinking": thinking} for r in rows]

        def failed(item, why):
            _, truncated = math_grader.answer_region(item["text"], item["finish_reason"])
            return {"correct": False, "correct_lenient": False, "extracted_answer": None,
                    "truncated": truncated, "has_boxed": math_grader.last_boxed(item["text"]) is not None,
                    "error": why}

        verdicts = map_with_deadline(
            math_grader.grade, items, workers=workers, stall_s=3 * timeout + 15,
            initializer=math_grader.warmup,
            on_timeout=lambda it: failed(it, f"timeout: scoring exceeded {3 * timeout + 15:.0f}s"),
            on_error=lambda it, e: failed(it, f"{type(e).__name__}: {e}"[:200]))
        for r, v in zip(rows, verdicts):
            if r.get("error"):  # the engine could not run this request
                v.update(correct=False, correct_lenient=False, error=r["error"])
        return verdicts

    def summary_extras(self, rows, verdicts, problems):
        checked = [v for v in verdicts if "strict_int_match" in v]
        # Integer golds: math-verify and a plain integer comparison of the last box should agree.
        disagree = sum(1 for v in checked if v["strict_int_match"] != v["correct_lenient"])
        return {"int_crosscheck_disagreements": disagree} if checked else {}


@register("amc23")
class AMC23(MathTask):
    pass


@register("aime24")
class AIME24(MathTask):
    pass


@register("aime25")
class AIME25(MathTask):
    pass


@register("math500")
class MATH500(MathTask):
    pass


@register("gsm8k")
class GSM8K(MathTask):
    question_field = "question"
