"""The harness adapter (tasks/base.py protocol) on the local copy."""
from lcb_helpers import fenced

from tasks.base import get_task


def test_task_protocol_end_to_end(data_dir):
    task = get_task("livecodebench", {"release": "release_v1", "timeout_s": 2, "ks": [1]})
    problems = task.load(data_dir, limit=40, data_file="livecodebench/livecodebench.jsonl")
    assert len(problems) == 40 and all(p.meta["release"] == "release_v1" for p in problems)
    by_id = {p.id: p for p in problems}
    msgs = task.messages(by_id["abc301_a"])
    assert [m["role"] for m in msgs] == ["user"] and "standard input" in msgs[0]["content"]
    solution = ("s = [input(), input()][1]\nt, a = s.count('T'), s.count('A')\n"
                "print('T' if t > a or (t == a and s[-1] == 'A') else 'A')")
    rows = [{"problem_id": "abc301_a", "sample_index": 0, "completion": fenced(solution),
             "finish_reason": "stop", "error": None},
            {"problem_id": "abc301_a", "sample_index": 1, "completion": "<think>never ends",
             "finish_reason": "length", "error": None},
            {"problem_id": "2777", "sample_index": 0, "completion": "", "finish_reason": "error",
             "error": "prompt too long"}]
    verdicts = task.score(rows, by_id, workers=2, timeout=5.0)
    assert [v["correct"] for v in verdicts] == [True, False, False]
    assert verdicts[0]["extracted_answer"].startswith("s = ")
    assert verdicts[1]["truncated"] and verdicts[1]["result"] == "no_code"
    assert verdicts[2]["error"] == "prompt too long"
    extras = task.summary_extras(rows, verdicts, by_id)["livecodebench"]
    assert extras["public_tests_only"] and extras["num_problems"] == 2
    assert extras["pass@1"] == 0.25 and "network_isolation" in extras["sandbox"]
