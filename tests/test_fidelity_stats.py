"""Statistics of the fidelity benchmark (scripts/fidelity/stats.py, report.py)."""
import math

import pytest

from scripts.fidelity import report as fr
from scripts.fidelity import stats as fs


def rec(logprobs, argmax=None):
    return dict(logprobs=list(logprobs), argmax=list(argmax or [0] * len(logprobs)),
                num_compressions=1, peak_kv_tokens=8)


def test_standard_error_is_sample_sd_over_sqrt_n():
    # sd of 1..4 = sqrt(5/3); se = sd / 2
    assert fs.standard_error([1, 2, 3, 4]) == pytest.approx(math.sqrt(5 / 3) / 2)
    assert math.isnan(fs.standard_error([1.0]))


def test_summarize_aligns_a_later_prompt_with_the_reference_and_scores_from_start():
    # reference forced from text index 2: positions 2..9; run forced from 4: positions 4..9
    ref = rec([-1.0] * 8, argmax=[5, 5, 5, 5, 5, 5, 5, 5])
    run = rec([-1.5, -1.2, -1.0, -3.0, -1.0, -1.0], argmax=[9, 9, 5, 5, 9, 5])
    s = fs.summarize([run], 4, [ref], 2, start=6)  # scores positions 6..9 only
    assert s["num_tokens"] == 4 and s["first_scored"] == 6
    assert s["delta_nll"] == pytest.approx((0 + 2.0 + 0 + 0) / 4)
    assert s["nll"] == pytest.approx(1.5) and s["nll_full"] == pytest.approx(1.0)
    assert s["argmax_agreement"] == pytest.approx(3 / 4)
    assert s["delta_nll_se"] == pytest.approx(fs.standard_error([0, 2.0, 0, 0]))


def test_reference_must_start_no_later_and_reach_as_far():
    with pytest.raises(ValueError):
        fs.summarize([rec([-1.0] * 4)], 2, [rec([-1.0] * 4)], 3, start=0)
    with pytest.raises(ValueError):
        fs.summarize([rec([-1.0] * 6)], 2, [rec([-1.0] * 3)], 2, start=0)


def test_paired_difference_is_per_token_and_negative_when_a_is_better():
    a = [rec([-1.0, -1.0, -2.0]), rec([-0.5, -0.5, -0.5])]
    b = [rec([-2.0, -1.0, -2.0]), rec([-1.5, -0.5, -1.0])]
    p = fs.paired(a, b, prompt_tokens=10, start=11)  # drops each text's first token
    diffs = [0.0, 0.0, 0.0, -0.5]  # NLL(a) - NLL(b) on positions 11, 12 of both texts
    assert p["num_tokens"] == 4
    assert p["mean"] == pytest.approx(fs.mean(diffs))
    assert p["se"] == pytest.approx(fs.standard_error(diffs))
    assert p["per_text"] == pytest.approx([0.0, -0.25])
    with pytest.raises(ValueError):
        fs.paired([rec([-1.0])], [rec([-1.0, -1.0])], 0, 0)


def _pair(mean, se):
    return dict(mean=mean, se=se, num_tokens=100, per_text=[mean])


def test_acceptance_rules_of_issue_13():
    pairs = {("recent", 1024): _pair(-0.01, 0.002), ("random", 1024): _pair(-0.2, 0.01),
             ("attn", 1024): _pair(0.003, 0.004),  # worse than attention, within 1 SE: ok
             ("recent", 2048): _pair(0.001, 0.002), ("random", 2048): _pair(-0.1, 0.01),
             ("attn", 2048): _pair(0.005, 0.004)}  # worse by more than 1 SE
    checks = {(c["budget"], c["baseline"]): c["ok"] for c in fr.acceptance(pairs, [1024, 2048])}
    assert checks == {(1024, "recent"): True, (1024, "random"): True, (1024, "attn"): True,
                      (2048, "recent"): False, (2048, "random"): True, (2048, "attn"): False}
    assert fr.verdict(fr.acceptance(pairs, [1024, 2048])) == "FAIL"
    assert fr.verdict(fr.acceptance({}, [1024])) == "INCOMPLETE"
    ok = {k: v for k, v in pairs.items() if k[1] == 1024}
    assert fr.verdict(fr.acceptance(ok, [1024])) == "PASS"


def test_paired_vs_default_pairs_every_method_with_the_default_at_its_budget():
    runs = {("default", 64): dict(records=[rec([-1.0, -1.0])], prompt_tokens=64),
            ("recent", 64): dict(records=[rec([-1.0, -3.0])], prompt_tokens=64),
            ("recent", 128): dict(records=[rec([-1.0, -3.0])], prompt_tokens=128)}
    pairs = fr.paired_vs_default(runs, block=1)  # scores from text index 65: the 2nd token
    assert set(pairs) == {("recent", 64)}  # no default at 128: nothing to pair with
    assert pairs["recent", 64]["mean"] == pytest.approx(-2.0)
