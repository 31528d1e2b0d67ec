"""Accuracy by output length: shared fixed-width bins, every sample in exactly one."""
import pytest

from tasks.length_bins import accuracy_by_length, length_edges


@pytest.mark.parametrize("max_tokens,edges", [(32, [0, 8, 16, 24, 32]), (30, [0, 7, 15, 22, 30]),
                                              (2, [0, 1, 2])])
def test_edges_split_zero_to_max_tokens(max_tokens, edges):
    assert length_edges(max_tokens) == edges


def test_every_sample_is_counted_once_edges_included():
    tokens = [0, 7, 8, 15, 16, 23, 24, 31, 32]  # both sides of every edge, and max_tokens
    correct = [1, 0, 1, 1, 0, 0, 1, 0, 0]
    rows = [{"problem_id": "p", "sample_index": i, "completion_tokens": t, "correct": bool(c)}
            for i, (t, c) in enumerate(zip(tokens, correct))]
    got = accuracy_by_length(rows, 32)
    assert got["edges"] == [0, 8, 16, 24, 32]
    assert got["bins"] == [
        {"lo": 0, "hi": 8, "samples": 2, "correct": 1, "accuracy": 0.5},
        {"lo": 8, "hi": 16, "samples": 2, "correct": 2, "accuracy": 1.0},
        {"lo": 16, "hi": 24, "samples": 2, "correct": 0, "accuracy": 0.0},
        {"lo": 24, "hi": 32, "samples": 3, "correct": 1, "accuracy": pytest.approx(1 / 3)}]


def test_an_empty_bin_has_no_accuracy():
    got = accuracy_by_length([{"completion_tokens": 40, "correct": True}], 40)
    assert [b["samples"] for b in got["bins"]] == [0, 0, 0, 1]
    assert [b["accuracy"] for b in got["bins"]] == [None, None, None, 1.0]


@pytest.mark.parametrize("tokens,why", [(33, "outside"), (-1, "outside"),
                                        (None, "not a token count")])
def test_a_length_outside_zero_to_max_tokens_is_an_error(tokens, why):
    row = {"problem_id": "p", "sample_index": 0, "completion_tokens": tokens}
    with pytest.raises(ValueError, match=why):
        accuracy_by_length([row], 32)
