"""pass@k, pass@1 and its standard error, throughput aggregation, baseline comparison."""
import math

import pytest

from tasks.summary import accuracy, compare, pass_at_k, percentile, summarize, throughput


def brute_pass_at_k(n, c, k):
    """Probability that a random k-subset of n samples (c correct) holds a correct one."""
    from itertools import combinations
    subsets = list(combinations([1] * c + [0] * (n - c), k))
    return sum(1 for s in subsets if any(s)) / len(subsets)


@pytest.mark.parametrize("n,c,k", [(4, 0, 1), (4, 1, 1), (4, 1, 2), (5, 2, 3), (6, 6, 4), (8, 3, 8)])
def test_pass_at_k_matches_enumeration(n, c, k):
    assert pass_at_k(n, c, k) == pytest.approx(brute_pass_at_k(n, c, k))


def rows(per_problem):
    return [{"problem_id": pid, "sample_index": i, "correct": ok}
            for pid, oks in per_problem.items() for i, ok in enumerate(oks)]


def test_pass_at_1_is_mean_over_problems_of_c_over_n():
    acc = accuracy(rows({"a": [1, 1, 0, 0], "b": [1, 0, 0, 0], "c": [0, 0, 0, 0]}))
    fr = [0.5, 0.25, 0.0]
    mean = sum(fr) / 3
    se = math.sqrt(sum((f - mean) ** 2 for f in fr) / 2 / 3)
    assert acc["pass@1"] == pytest.approx(mean)
    assert acc["pass@1_stderr"] == pytest.approx(se)
    assert acc["pass@2"] == pytest.approx((5 / 6 + 0.5 + 0) / 3)
    assert acc["pass@4"] == pytest.approx(2 / 3)
    assert "pass@8" not in acc


def test_unequal_sample_counts_weight_problems_equally():
    acc = accuracy(rows({"a": [1], "b": [0, 0, 0, 0]}))
    assert acc["pass@1"] == pytest.approx(0.5)
    assert "pass@2" not in acc  # problem a has a single sample
    assert accuracy([]) == {"pass@1": None, "pass@1_stderr": None}


def test_percentile():
    assert percentile([1, 2, 3, 4, 5], 50) == 3
    assert percentile(list(range(101)), 95) == pytest.approx(95)
    assert percentile([], 95) is None


def test_throughput_over_resumed_segments():
    t = throughput([
        {"wall_time_s": 2.0, "num_output_tokens": 100, "peak_running": 4, "mean_running": 3.0,
         "compression_time_s": 0.5},
        {"wall_time_s": 6.0, "num_output_tokens": 500, "peak_running": 2, "mean_running": 1.0,
         "compression_time_s": 1.5}])
    assert t["output_tokens_per_s"] == pytest.approx(75.0)
    assert t["mean_running"] == pytest.approx(1.5)
    assert t["peak_running"] == 4
    assert t["compression_time_share"] == pytest.approx(0.25)
    assert t["generation_segments"] == 2 and t["time_to_finish_s"] == 8.0


def test_summary_rates_and_baseline_block():
    rs = [{"problem_id": "a", "sample_index": 0, "correct": True, "correct_lenient": True,
           "finish_reason": "stop", "has_boxed": True, "completion_tokens": 10},
          {"problem_id": "a", "sample_index": 1, "correct": False, "correct_lenient": True,
           "finish_reason": "length", "has_boxed": False, "completion_tokens": 30}]
    s = summarize(rs, num_problems=2, n=2, segments=[{"wall_time_s": 1.0, "num_output_tokens": 40}])
    assert s["pass@1"] == 0.5 and s["pass@1_incl_truncated"] == 1.0
    assert s["truncation_rate"] == 0.5 and s["boxed_rate"] == 0.5
    assert s["num_problems"] == 1 and s["num_samples_expected"] == 4 and not s["complete"]
    assert s["mean_output_tokens"] == 20 and s["output_tokens_per_s"] == 40
    b = compare({"pass@1": 0.45, "output_tokens_per_s": 300.0, "time_to_finish_s": 10},
                {"pass@1": 0.5, "output_tokens_per_s": 100.0, "time_to_finish_s": 25})
    assert b["accuracy_retained"] == pytest.approx(90.0)
    assert b["speedup"] == pytest.approx(3.0) and b["time_to_finish_speedup"] == pytest.approx(2.5)
    assert compare({"pass@1": 0.1}, {"pass@1": 0.0})["accuracy_retained"] is None
