"""Answer classes by math-verify's equivalence, computed in the scoring pool, and the
agreement with Full KV built on them. math-verify runs here: few cases, short timeouts."""
import pytest

from tasks import get_task
from tasks.answer_classes import (answer_classes, cross_classes, needs_comparison,
                                  representatives, voting_answer)
from tasks.consensus import answer_agreement, maj_at_k
from tasks.math_equivalence import classify, without_verify

HANG = "9^{9^{9^{9}}}"  # sympy cannot compare it with 5 in a second


def sample(pid, i, answer, correct, finish="stop"):
    return {"problem_id": pid, "sample_index": i, "extracted_answer": answer, "correct": correct,
            "finish_reason": finish, "truncated": finish == "length"}


# p: one wrong answer, then one right answer written three ways (string majority: a 4-way tie
# that "1/3", first, would win). q: only sample 2 votes (no answer, cut at max_tokens,
# rejected by the engine).
ROWS = [sample("p", 0, "1/3", False), sample("p", 1, "1/2", True),
        sample("p", 2, "0.5", True), sample("p", 3, "\\frac{1}{2}", True),
        sample("q", 0, None, False), sample("q", 1, "7", False, "length"),
        sample("q", 2, "7", True), sample("q", 3, None, False, "error")]


def with_classes(rows, classes):
    return [{**r, "answer_class": c} for r, c in zip(rows, classes)]


def test_voting_answer():
    assert voting_answer(sample("p", 0, " 7 ", True)) == "7"
    assert voting_answer(sample("p", 0, "", False)) is None
    assert voting_answer(sample("p", 0, "7", False, "error")) is None
    assert voting_answer(sample("p", 0, "7", False, "length")) is None
    assert voting_answer(sample("p", 0, "7", True, "length"), penalize_truncated=False) == "7"


@pytest.fixture(scope="module")
def base_classes():
    """Through the math task, as scoring will call it: sample rows and their verdicts."""
    rows = list(reversed(ROWS))  # any row order
    samples = [{k: r[k] for k in ("problem_id", "sample_index", "finish_reason")} for r in rows]
    verdicts = [{k: r[k] for k in ("extracted_answer", "correct", "truncated")} for r in rows]
    return get_task("amc23").answer_classes(samples, verdicts, workers=1, timeout=2)


def test_equivalent_answers_are_one_class_and_win_the_majority(base_classes):
    assert list(reversed(base_classes.per_row)) == [0, 1, 1, 1, None, None, 0, None]
    assert base_classes.reps == {"p": ["1/3", "1/2"], "q": ["7"]}
    assert base_classes.stats["timeouts"] == 0 and base_classes.stats["failed_problems"] == 0
    m = maj_at_k(with_classes(ROWS, [0, 1, 1, 1, None, None, 0, None]), 4)
    assert m["4"]["mean"] == 1.0
    assert m["1"]["mean"] == pytest.approx((3 / 4 + 1 / 4) / 2)


def test_a_comparison_that_times_out_is_not_equal_and_is_counted():
    rows = [sample("p", 0, "5", True), sample("p", 1, HANG, False), sample("p", 2, "5.0", True)]
    got = answer_classes(rows, workers=1, timeout=1)
    assert got.per_row == [0, 1, 0]
    assert got.stats["timeouts"] == 1


def test_agreement_with_identical_completions_then_one_changed_majority(base_classes):
    base = with_classes(ROWS, list(reversed(base_classes.per_row)))
    base_reps = representatives(base)
    assert base_reps == base_classes.reps
    cross_same, _ = cross_classes(base_reps, base_reps, workers=1, timeout=2)
    same = answer_agreement(base, base, cross_same)
    assert same["answer_agreement"]["mean"] == 1.0 and same["sample_answer_in_baseline"] == 1.0
    # q now answers "8" four times (one class): its majority is no longer Full KV's "7".
    run = base[:4] + with_classes([sample("q", i, "8", False) for i in range(4)], [0] * 4)
    cross, stats = cross_classes(representatives(run), base_reps, workers=1, timeout=2)
    assert cross == {"p": [0, 1], "q": [None]} and stats["failed_problems"] == 0
    other = answer_agreement(run, base, cross)
    assert other["answer_agreement"]["mean"] == 0.5
    assert other["sample_answer_in_baseline"] == 0.5  # p's 4 answers of 8


def test_representatives_need_classes_numbered_from_zero():
    rows = with_classes([sample("p", 0, "3", True), sample("p", 1, "4", False)], [0, 2])
    with pytest.raises(ValueError, match=r"problem p: answer classes \[0, 2\]"):
        representatives(rows)


def test_past_its_time_budget_a_problem_tells_answers_apart_by_string_only():
    got = classify({"known": [], "answers": ["1/2", "0.5", "3"], "grow": True, "budget_s": 0})
    assert got["classes"] == [0, 1, 2] and got["skipped"] == 3 and got["comparisons"] == 0


def test_no_worker_starts_when_strings_and_integers_settle_every_class():
    assert not needs_comparison({"known": [], "answers": ["7"], "grow": True})  # greedy
    assert not needs_comparison({"known": ["7", "8"], "answers": ["8", "7"], "grow": False})
    assert not needs_comparison({"known": [], "answers": ["7", "8", "-3", "007"], "grow": True})
    assert without_verify({"known": [], "answers": ["25", "7", "025"], "grow": True})[
        "classes"] == [0, 1, 0]  # integers by value, as math-verify compares them
    assert needs_comparison({"known": [], "answers": ["7", "7.0"], "grow": True})
    assert needs_comparison({"known": ["7"], "answers": ["7.0"], "grow": False})


def test_a_problem_whose_worker_failed_gets_classes_by_string_and_integer_value():
    item = {"known": ["7", "1/2"], "answers": ["0.5", "7", "07"], "grow": False}
    assert without_verify(item)["classes"] == [None, 0, 0]
    assert without_verify({**item, "grow": True})["classes"] == [2, 0, 0]
