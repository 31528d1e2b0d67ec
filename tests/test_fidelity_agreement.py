"""Answer agreement statistics (scripts/fidelity/agreement_stats.py)."""
import pytest

from scripts.fidelity import agreement_stats as ast
from scripts.fidelity.stats import standard_error


def test_majority_breaks_ties_by_first_appearance():
    assert ast.majority(["3", "4", "4"]) == "4"
    assert ast.majority(["5", "3", "3", "5"]) == "5"
    assert ast.majority([None, None, "2"]) is None  # "no answer" counts as an answer
    with pytest.raises(ValueError):
        ast.majority([])


def test_overlap_is_one_minus_total_variation():
    assert ast.overlap(["1", "1", "2", "3"], ["1", "2", "2", "2"]) == pytest.approx(0.25 + 0.25)
    assert ast.overlap(["1"], ["2"]) == 0
    assert ast.overlap(["1", "2"], ["2", "1"]) == pytest.approx(1.0)


def test_greedy_agreement_counts_problems_with_equal_answers():
    full = {"a": ["1"], "b": ["2"], "c": ["3"], "d": ["4"]}
    run = {"a": ["1"], "b": [None], "c": ["3"], "d": ["5"]}
    agr = ast.agreement(full, run, ["a", "b", "c", "d"])
    assert agr["flags"] == [True, False, True, False]
    assert agr["majority"]["mean"] == 0.5 and agr["majority"]["n"] == 4
    assert agr["majority"]["se"] == pytest.approx(standard_error([1, 0, 1, 0]))


def test_sampled_agreement_compares_majorities_and_samples():
    full = {"a": ["1", "1", "2"], "b": ["7", "8", "8"]}
    run = {"a": ["2", "1", "1"], "b": ["7", "7", "8"]}
    agr = ast.agreement(full, run, ["a", "b"])
    assert agr["flags"] == [True, False]  # a: 1 == 1; b: 7 != 8
    assert agr["per_sample"]["mean"] == pytest.approx(3 / 6)  # samples equal to full's majority
    assert agr["overlap"]["mean"] == pytest.approx((1.0 + 2 / 3) / 2)  # a: same mix; b: 1/3 + 1/3


def test_paired_difference_of_flags():
    d = ast.paired_difference([True, True, False, True], [True, False, False, False])
    assert d["mean"] == pytest.approx(0.5) and d["n"] == 4
    assert d["se"] == pytest.approx(standard_error([0, 1, 0, 1]))
    with pytest.raises(ValueError):
        ast.paired_difference([True], [True, False])
