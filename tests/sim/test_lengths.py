"""Output-length distributions: the capped lognormal has the asked mean and cap, replay reads
a harness run's samples.jsonl, bad input is a clear error."""
import json
import math
import random

import pytest

from zipage.sim.lengths import CappedLognormal, Fixed, Replay, capped_lognormal_mean, read_samples
from zipage.sim.paper import length_distribution, paper_requests
from zipage.sim.simulate import replay_requests


def test_fixed():
    assert Fixed(7).draw(3) == [7, 7, 7]
    with pytest.raises(ValueError, match=">= 1"):
        Fixed(0)


def test_capped_mean_formula_matches_monte_carlo():
    rng = random.Random(0)
    mu, sigma, cap = math.log(9000), 0.7, 20000
    mc = sum(min(cap, rng.lognormvariate(mu, sigma)) for _ in range(200_000)) / 200_000
    assert capped_lognormal_mean(mu, sigma, cap) == pytest.approx(mc, rel=0.01)


@pytest.mark.parametrize("mean,sigma", [(2048, 0.6), (16384, 0.6), (30000, 0.4), (500, 1.2)])
def test_capped_lognormal_has_the_asked_mean_and_cap(mean, sigma):
    d = CappedLognormal(mean, 32768, sigma)
    assert capped_lognormal_mean(d.mu, sigma, 32768) == pytest.approx(mean, rel=1e-9)
    lengths = d.draw(40_000, seed=3)
    assert all(1 <= n <= 32768 for n in lengths)
    assert sum(lengths) / len(lengths) == pytest.approx(mean, rel=0.02)
    at_cap = sum(n == 32768 for n in lengths) / len(lengths)
    assert at_cap == pytest.approx(d.describe()["fraction_at_cap"], abs=0.01)
    assert d.draw(100, seed=3) == lengths[:100]  # seeded


def test_capped_lognormal_rejects_impossible_means():
    with pytest.raises(ValueError, match="cap"):
        CappedLognormal(32768, 32768)
    with pytest.raises(ValueError, match="sigma"):
        CappedLognormal(100, 1000, 0)


def test_a_mean_at_the_cap_is_every_sample_at_the_cap():
    assert length_distribution(32768, 32768, 0.6) == Fixed(32768)
    requests, dist = paper_requests(16384, num_prompts=3, samples_per_prompt=4)
    assert len(requests) == 12 and dist["kind"] == "capped_lognormal"
    assert [r.group for r in requests] == [0] * 4 + [1] * 4 + [2] * 4


def write_samples(path, rows):
    path.write_text("".join((json.dumps(r) if isinstance(r, dict) else r) + "\n" for r in rows))


def test_replay_reads_completion_tokens_and_groups_by_problem(tmp_path):
    f = tmp_path / "samples.jsonl"
    write_samples(f, [
        {"problem_id": "a", "sample_index": 0, "prompt_tokens": 50, "completion_tokens": 900,
         "finish_reason": "stop"},
        {"problem_id": "a", "sample_index": 1, "prompt_tokens": 50, "completion_tokens": 32768,
         "finish_reason": "length"},
        {"problem_id": "b", "sample_index": 0, "prompt_tokens": 70, "completion_tokens": 0,
         "finish_reason": "error"}, "",
        {"problem_id": 7, "sample_index": 0, "prompt_tokens": 80, "completion_tokens": 12,
         "finish_reason": "stop"}])
    requests = replay_requests(read_samples(str(f)))
    assert [(r.group, r.prompt_len, r.output_len) for r in requests] == \
        [(0, 50, 900), (0, 50, 32768), (1, 80, 12)]
    assert Replay(str(f)).describe()["samples"] == 3


def test_replay_names_the_bad_line(tmp_path):
    f = tmp_path / "samples.jsonl"
    write_samples(f, [{"problem_id": "a", "prompt_tokens": 5, "completion_tokens": 3},
                      {"problem_id": "a", "completion": "no counts"}])
    with pytest.raises(ValueError, match=r"samples.jsonl:2: .*completion_tokens"):
        read_samples(str(f))
    write_samples(f, [{"problem_id": "a", "prompt_tokens": 5, "completion_tokens": 0,
                       "finish_reason": "error"}])
    with pytest.raises(ValueError, match="no completed samples"):
        read_samples(str(f))


def test_a_mean_above_the_cap_is_an_error_not_a_clamp():
    from zipage.sim.paper import length_distribution
    assert length_distribution(8192, 8192, 0.6).draw(3) == [8192] * 3  # every sample at the cap
    with pytest.raises(ValueError, match="above the cap 8192"):
        length_distribution(9000, 8192, 0.6)
