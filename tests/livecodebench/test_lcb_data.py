"""Data loading, row validation and the restricted unpickler."""
import base64
import json
import os
import pickle
import zlib
from collections import Counter

import pytest
from lcb_helpers import write_jsonl

from tasks.livecodebench.data import DataError, decode_tests, read_file, restricted_unpickle
from tasks.livecodebench.task import load_problems


def test_local_copy_counts(data_dir):
    problems = load_problems(data_dir)
    assert len(problems) == 742
    assert Counter(p.release for p in problems) == {"release_v1": 400, "release_v5": 167,
                                                    "release_v6": 175}
    assert len(load_problems(data_dir, release="release_v6")) == 175
    assert len(load_problems(data_dir, release="v5")) == 167
    assert len(load_problems(data_dir, release=["v5", "v6"])) == 342
    window = load_problems(data_dir, start_date="2025-01-01", end_date="2025-05-01")
    assert len(window) == 182
    assert all("2025-01-01" <= p.contest_date <= "2025-05-01" for p in window)
    assert [p.question_id for p in load_problems(data_dir, limit=3)] == \
        [p.question_id for p in problems[:3]]
    # the local copy has public tests only, and every LeetCode row names its function
    assert not any(p.has_private_tests for p in problems)
    assert all(p.fn_name for p in problems if p.platform == "leetcode")
    assert {p.mode for p in problems if p.platform != "leetcode"} == {"stdin"}


GOOD = {"question_id": "x1", "question_title": "t", "question_content": "c",
        "platform": "atcoder", "contest_id": "abc", "contest_date": "2024-01-01T00:00:00",
        "difficulty": "easy", "starter_code": "", "metadata": "{}",
        "public_test_cases": json.dumps([{"input": "1\n", "output": "1\n", "testtype": "stdin"}]),
        "private_test_cases": None, "release_added": "release_v6"}


@pytest.mark.parametrize("bad_row, message", [
    ("{not json", "invalid JSON"),
    (dict(GOOD, difficulty="trivial"), "difficulty"),
    (dict(GOOD, contest_date="yesterday"), "contest_date"),
    (dict(GOOD, public_test_cases="[1, 2]"), "public_test_cases"),
    (dict(GOOD, question_content=None), "question_content"),
    (dict(GOOD, metadata='{"func_name": "f"}'), "not all functional"),
    (dict(GOOD, question_id="x0"), "duplicate question_id"),
])
def test_malformed_rows_name_the_line(tmp_path, bad_row, message):
    path = tmp_path / "lcb.jsonl"
    write_jsonl(path, [dict(GOOD, question_id="x0"), "", bad_row])
    with pytest.raises(DataError) as err:
        read_file(str(path))
    assert f"{path}:3:" in str(err.value) and message in str(err.value)


def _encode(obj_bytes):
    return base64.b64encode(zlib.compress(obj_bytes)).decode()


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_restricted_unpickler_refuses_globals(tmp_path):
    marker = tmp_path / "pwned"
    payload = pickle.dumps(_Evil(str(marker)))
    with pytest.raises(pickle.UnpicklingError, match="refused global"):
        restricted_unpickle(payload)
    with pytest.raises(DataError, match="neither JSON nor a safe"):
        decode_tests(_encode(payload), "private_test_cases")
    # a str wrapped around a global, and a non-str payload, are refused too
    with pytest.raises(DataError):
        decode_tests(_encode(pickle.dumps(["x", os.getcwd])), "private_test_cases")
    with pytest.raises(DataError, match="expected str"):
        decode_tests(_encode(pickle.dumps([1, 2])), "private_test_cases")
    assert not marker.exists()


def test_private_payload_decodes_and_counts(tmp_path):
    tests = [{"input": "2\n", "output": "4\n", "testtype": "stdin"}]
    blob = _encode(pickle.dumps(json.dumps(tests), protocol=4))
    assert decode_tests(blob) == tests
    assert decode_tests(json.dumps(tests)) == tests  # plain JSON form
    path = tmp_path / "lcb.jsonl"
    write_jsonl(path, [dict(GOOD, private_test_cases=blob)])
    (p,) = read_file(str(path))
    assert (p.num_public, p.num_private, p.has_private_tests) == (1, 1, True)
    assert p.tests[1] == tests[0]


def test_hub_path_needs_a_pinned_revision():
    # with a revision it goes to the hub: tests/harness/test_hub.py (offline, a copy)
    with pytest.raises(DataError, match="pin a commit"):
        load_problems(None, hub_revision=None)
