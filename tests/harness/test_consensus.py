"""maj@k and agreement with Full KV over hand-made answer classes (no math-verify needed:
tests/harness/test_answer_classes.py covers the equivalence itself)."""
import pytest

from tasks.consensus import answer_agreement, k_values, maj_at_k, majority_class
from tasks.summary import accuracy


def rows(per_problem):
    """{problem: [(answer class or None, correct), ...]} in sample-index order -> rows."""
    return [{"problem_id": pid, "sample_index": i, "answer_class": c, "correct": ok}
            for pid, samples in per_problem.items() for i, (c, ok) in enumerate(samples)]


@pytest.mark.parametrize("n,ks", [(1, [1]), (3, [1, 3]), (4, [1, 2, 4]), (6, [1, 2, 6]),
                                  (12, [1, 2, 4, 12]), (32, [1, 2, 4, 8, 16, 32])])
def test_k_values_are_powers_of_two_dividing_n_and_n(n, ks):
    assert k_values(n) == ks


def test_majority_tie_goes_to_the_class_seen_first_and_unanswered_never_wins():
    assert majority_class([None, 2, 1, 1, 2]) == 2       # 2 and 1 tie; 2's first sample is 1
    assert majority_class([1, 2, 2, 1]) == 1
    assert majority_class([None, None, None, 3]) == 3    # three unanswered do not outvote one
    assert majority_class([None, None]) is None
    assert majority_class([]) is None


# a: classes 0 (right) / 1 (wrong); b: two unanswered, then class 0 (right) twice.
HAND = {"a": [(0, True), (1, False), (1, False), (None, False)],
        "b": [(None, False), (None, False), (0, True), (0, True)]}


def test_maj_at_k_by_hand():
    m = maj_at_k(rows(HAND), 4)
    assert list(m) == ["1", "2", "4"]
    # maj@1: a 1/4, b 2/4 -> 0.375; stderr = sd(0.25, 0.5) / sqrt(2) = 0.125
    assert m["1"] == {"mean": pytest.approx(0.375), "stderr": pytest.approx(0.125), "problems": 2}
    # maj@2: a [0,1] tie -> class 0 (first) right, [1,None] -> 1 wrong: 0.5;
    #        b [None,None] no answer -> wrong, [0,0] right: 0.5
    assert m["2"] == {"mean": pytest.approx(0.5), "stderr": pytest.approx(0.0), "problems": 2}
    # maj@4: a -> class 1 (two votes) wrong; b -> class 0 right (unanswered do not vote)
    assert m["4"] == {"mean": pytest.approx(0.5), "stderr": pytest.approx(0.5), "problems": 2}


def test_maj_at_1_equals_pass_at_1_with_unanswered_samples():
    r = rows({**HAND, "c": [(None, False), (0, False), (1, True), (1, True)]})
    acc = accuracy(r)
    assert maj_at_k(r, 4)["1"]["mean"] == pytest.approx(acc["pass@1"])
    assert maj_at_k(r, 4)["1"]["stderr"] == pytest.approx(acc["pass@1_stderr"])


def test_the_majority_class_is_judged_by_its_first_member_in_the_group():
    # Non-transitive equivalence can leave a class's members with different verdicts.
    r = rows({"a": [(None, False), (0, False), (0, True), (1, True)]})
    assert maj_at_k(r, 4)["4"]["mean"] == 0.0


def test_only_full_groups_count_in_a_partial_run():
    r = [x for x in rows(HAND) if (x["problem_id"], x["sample_index"]) != ("a", 3)]
    m = maj_at_k(r, 4)
    assert m["4"] == {"mean": 1.0, "stderr": 0.0, "problems": 1}       # only b has all four
    assert m["2"]["mean"] == pytest.approx((1.0 + 0.5) / 2)            # a: only [0, 1]


def test_a_sample_listed_twice_is_an_error():
    r = rows(HAND)
    with pytest.raises(ValueError, match="problem a: sample 0 appears twice"):
        maj_at_k(r + r[:1], 4)


# Baseline: a's majority is class 0, b's is class 1.
BASE = {"a": [(0, True), (0, True), (1, False)], "b": [(0, True), (1, False), (1, False)]}


def test_identical_answers_agree_fully():
    cross = {"a": [0, 1], "b": [0, 1]}  # every class is itself
    got = answer_agreement(rows(BASE), rows(BASE), cross)
    assert got == {"answer_agreement": {"mean": 1.0, "stderr": 0.0, "problems": 2,
                                        "unanswered_by_both": 0, "unanswered_by_one": 0},
                   "sample_answer_in_baseline": 1.0}


def test_agreement_falls_when_one_problem_changes_its_majority():
    run = {**BASE, "b": [(0, True), (0, True), (1, False)]}  # b's majority is now class 0
    got = answer_agreement(rows(run), rows(BASE), {"a": [0, 1], "b": [0, 1]})
    assert got["answer_agreement"] == {"mean": 0.5, "stderr": 0.5, "problems": 2,
                                       "unanswered_by_both": 0, "unanswered_by_one": 0}
    assert got["sample_answer_in_baseline"] == 1.0  # every answer is still one Full KV gave


def test_agreement_goes_through_the_cross_map_and_counts_new_answers():
    # The run numbers its classes its own way; its class 1 is new to the baseline.
    run = {"a": [(1, False), (0, True), (0, True)], "b": [(0, False), (1, True), (0, False)]}
    cross = {"a": [0, None], "b": [1, 0]}
    got = answer_agreement(rows(run), rows(BASE), cross)
    assert got["answer_agreement"]["mean"] == 1.0
    assert got["sample_answer_in_baseline"] == pytest.approx(5 / 6)  # a's first sample is new


def test_a_problem_only_one_run_answers_disagrees_and_one_neither_answers_agrees():
    run = {**BASE, "b": [(None, False), (None, False), (None, False)],
           "d": [(None, False)], "e": [(None, False)]}
    base = {**BASE, "c": [(None, False)], "d": [(None, False), (None, False)],
            "e": [(None, False)]}
    got = answer_agreement(rows(run), rows(base), {"a": [0, 1]})
    assert got["answer_agreement"] == {"mean": pytest.approx(3 / 4), "stderr": pytest.approx(0.25),
                                       "problems": 4, "unanswered_by_both": 2,  # d, e
                                       "unanswered_by_one": 1}  # b; c is not in the run
    assert got["sample_answer_in_baseline"] == 1.0  # of the samples that have an answer
    nothing = answer_agreement(rows({"b": run["b"]}), rows(base), {})
    assert nothing["sample_answer_in_baseline"] is None
    assert nothing["answer_agreement"]["mean"] == 0.0  # b: Full KV answered it


def test_a_cross_map_missing_a_problem_both_answered_is_an_error():
    with pytest.raises(ValueError, match="problem b: the cross map has no entry"):
        answer_agreement(rows(BASE), rows(BASE), {"a": [0, 1]})
