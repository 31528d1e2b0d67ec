"""Golden outputs for the math scorer (math-verify in a process pool)."""
import time

import pytest

from tasks import get_task
from tasks.base import Problem
from tasks.pool import map_with_deadline

HANG = r"\boxed{9^{9^{9^{9}}}}"
# (gold, completion, finish_reason, correct, extracted answer or None)
GOLDEN = [
    ("27", r"so they meet after \boxed{27} miles", "stop", True, "27"),
    ("27.0", r"\boxed{27}", "stop", True, "27"),                        # AMC float gold
    ("27", r"\boxed{27.0}", "stop", True, "27.0"),
    ("25", r"\boxed{025}", "stop", True, "025"),                        # leading zeros
    ("\\frac{1}{2}", r"The probability is $\boxed{\dfrac{1}{2}}$.", "stop", True, "\\frac{1}{2}"),
    ("0.5", r"\boxed{\frac12}", "stop", True, None),
    ("\\frac{\\sqrt{3}}{2}", r"\boxed{\dfrac{\sqrt3}{2}}", "stop", True, None),
    ("-1", r"\boxed{-1}", "stop", True, "-1"),
    ("\\left( 3, \\frac{\\pi}{2} \\right)", r"\boxed{(3, \frac{\pi}{2})}", "stop", True, None),
    ("18", "The answer is 18.", "stop", True, "18"),                    # no box: last number
    ("5", r"\boxed{5}. Then step 6 of 7 checks it.", "stop", True, "5"),  # box beats last number
    ("70", r"<think>maybe \boxed{69}?</think> so \boxed{70}.", "stop", True, "70"),
    ("18", r"\boxed{17}", "stop", False, "17"),                         # wrong
    ("\\frac{1}{2}", r"\boxed{\frac{1}{3}}", "stop", False, None),
    ("70", r"<think>first \boxed{70}</think> final \boxed{69}", "stop", False, "69"),
    ("7", "Let me think. We have 12 apples and 7 pears", "length", False, None),  # truncated
    ("3", "<think> truncated without answer 3 4 5", "length", False, None),
    ("42", "I do not know how to solve this.", "stop", False, None),    # no answer at all
    ("5", HANG, "stop", False, None),                                   # pathological: times out
]


@pytest.fixture(scope="module")
def verdicts():
    task = get_task("amc23")
    problems = {str(i): Problem(str(i), "q", g) for i, (g, *_rest) in enumerate(GOLDEN)}
    rows = [{"problem_id": str(i), "completion": c, "finish_reason": fr}
            for i, (_, c, fr, *_rest) in enumerate(GOLDEN)]
    t0 = time.monotonic()
    out = task.score(rows, problems, workers=2, timeout=1)
    return out, time.monotonic() - t0


@pytest.mark.parametrize("i", range(len(GOLDEN)), ids=[g[1][:40] for g in GOLDEN])
def test_golden(verdicts, i):
    gold, text, reason, correct, extracted = GOLDEN[i]
    v = verdicts[0][i]
    assert v["correct"] is correct, (gold, text, v)
    if extracted is not None:
        assert v["extracted_answer"] == extracted
    assert v["truncated"] is (reason == "length")


def test_truncated_flags_and_lenient(verdicts):
    v = verdicts[0][15]                     # "12 apples and 7 pears", cut at max_tokens
    assert v["truncated"] and not v["has_boxed"]
    assert v["correct_lenient"] is True     # the last-number pitfall, not counted by default


def test_timeout_is_recorded_and_bounded(verdicts):
    v, elapsed = verdicts[0][-1], verdicts[1]
    assert v["error"].startswith("timeout"), v
    assert elapsed < 30


def test_truncation_penalty_is_an_option():
    task = get_task("amc23", {"penalize_truncated": False})
    rows = [{"problem_id": "a", "completion": r"\boxed{7} and then", "finish_reason": "length"}]
    (v,) = task.score(rows, {"a": Problem("a", "q", "7")}, workers=1, timeout=2)
    assert v["correct"] and v["truncated"]


def test_thinking_model_answer_comes_after_think_end():
    task = get_task("aime24", {"thinking": True})
    rows = [{"problem_id": "a", "completion": r"so \boxed{7} maybe", "finish_reason": "stop"},
            {"problem_id": "a", "completion": r"so \boxed{6}</think>\boxed{7}", "finish_reason": "stop"}]
    v = task.score(rows, {"a": Problem("a", "q", "7")}, workers=1, timeout=2)
    assert [x["correct"] for x in v] == [False, True]


def test_engine_error_rows_count_wrong():
    task = get_task("gsm8k")
    rows = [{"problem_id": "a", "completion": "", "finish_reason": "error", "error": "too long"}]
    (v,) = task.score(rows, {"a": Problem("a", "q", "7")}, workers=1, timeout=2)
    assert not v["correct"] and v["error"] == "too long"


def test_pool_kills_a_hung_worker_and_keeps_the_rest():
    t0 = time.monotonic()
    out = map_with_deadline(__import__("helpers").maybe_hang, [1, "hang", 3, "raise", 5],
                            workers=2, stall_s=2, on_timeout=lambda x: "TIMEOUT",
                            on_error=lambda x, e: f"ERR {type(e).__name__}")
    assert out == [2, "TIMEOUT", 6, "ERR ValueError", 10]
    assert time.monotonic() - t0 < 30


def _identity(x):
    return x


def test_a_map_longer_than_one_pool_returns_in_order():
    """More items than one pool's workers take before recycling (ITEMS_PER_WORKER each): on
    Python 3.11 a pool recycling with max_tasks_per_child deadlocked here."""
    from tasks import pool
    n = 2 * pool.ITEMS_PER_WORKER + 7
    out = pool.map_with_deadline(_identity, list(range(n)), workers=1, stall_s=60,
                                 on_timeout=lambda i: "T", on_error=lambda i, e: "E")
    assert out == list(range(n))
