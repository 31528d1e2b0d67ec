"""Golden verdicts: LiveCodeBench semantics end to end through the sandbox."""
import pytest
from lcb_helpers import problem, sample

from tasks.livecodebench.task import load_problems, score_samples
from tasks.sandbox import SandboxConfig

CFG = SandboxConfig(timeout_s=1.0, global_slack_s=2.0, workers=2)
ADD = problem("add", tests=[("1 2\n", "3\n"), ("10 -4\n", "6\n")])
HALF = problem("half", tests=[("1\n", "0.5\n")])
STEPS = problem("steps", tests=[("1\n", "1\n"), ("2\n", "2\n"), ("3\n", "3\n")])
PAIR = problem("pair", tests=[("1\n2", "[3, 2]"), ("3\n4", "[7, 12]")], fn_name="calc")

CASES = {  # name: (problem, code, expected result)
    "input": (ADD, "a, b = map(int, input().split())\nprint(a + b)", "pass"),
    "stdin_read": (ADD, "import sys\nprint(sum(map(int, sys.stdin.read().split())))", "pass"),
    "open0": (ADD, "print(sum(map(int, open(0).read().split())))", "pass"),
    "alias": (ADD, "from sys import stdin\nprint(sum(map(int, stdin.readline().split())))",
              "pass"),
    "buffer": (ADD, "import sys\ninput = sys.stdin.buffer.readline\n"
                    "sys.stdout.write(str(sum(map(int, input().split()))) + '\\n')", "pass"),
    "main_exit": (ADD, "def main():\n    a, b = map(int, input().split())\n    print(a + b)\n"
                       "    exit(0)\n\nif __name__ == '__main__':\n    main()", "pass"),
    "decimal": (HALF, "print(f'{int(input()) / 2:.5f}')", "pass"),
    "float_off": (HALF, "print(0.5000001)", "wrong_answer"),
    "functional": (PAIR, "class Solution:\n    def calc(self, a: int, b: int):\n"
                         "        return a + b, a * b", "pass"),
    "no_method": (PAIR, "class Solution:\n    def other(self, a, b):\n        return [a]",
                  "compile_error"),
    "wrong": (ADD, "a, b = map(int, input().split())\nprint(a - b)", "wrong_answer"),
    "runtime": (ADD, "raise ValueError('boom')", "runtime_error"),
    "syntax": (ADD, "print(", "compile_error"),
    "loop": (ADD, "while True:\n    pass", "time_limit"),
    "stubborn": (ADD, "while True:\n    try:\n        while True:\n            pass\n"
                      "    except BaseException:\n        pass", "global_timeout"),
    "guarded": (ADD, "import os\nos.system('true')\nprint(3)", "runtime_error"),
    "first_fail": (STEPS, "x = int(input())\nif x == 2:\n    print(0)\nelif x == 3:\n"
                          "    while True:\n        pass\nelse:\n    print(x)", "wrong_answer"),
}
CODES = {"pass": 1, "wrong_answer": -2, "compile_error": -2, "time_limit": -3,
         "runtime_error": -4, "global_timeout": -1}


@pytest.fixture(scope="module")
def verdicts():
    problems = [ADD, HALF, STEPS, PAIR]
    samples = [sample(p.question_id, code, i) for i, (p, code, _) in enumerate(CASES.values())]
    got, summary = score_samples(problems, samples, CFG)
    return dict(zip(CASES, got)), summary


@pytest.mark.parametrize("name", list(CASES))
def test_verdict(verdicts, name):
    v = verdicts[0][name]
    expected = CASES[name][2]
    assert v["result"] == expected, v
    assert v["result_code"] == CODES[expected] and v["passed"] == (expected == "pass")


def test_reasons_and_early_stop(verdicts):
    v = verdicts[0]
    assert "ValueError: boom" in v["runtime"]["reason"]
    assert "SyntaxError" in v["syntax"]["reason"]
    assert v["loop"]["failed_test"] == 0 and "time limit" in v["loop"]["reason"]
    assert "NoneType" in v["guarded"]["reason"]  # LiveCodeBench's guard disables os.system
    # first failing test stops the run: test 2 (an infinite loop) never ran
    assert v["first_fail"]["failed_test"] == 1 and v["first_fail"]["tests_passed"] == 1
    assert v["first_fail"]["run_time_s"] < CFG.timeout_s


def test_summary_fields(verdicts):
    summary = verdicts[1]
    assert summary["num_samples"] == len(CASES) and summary["public_tests_only"]
    assert summary["results"]["pass"] == sum(1 for c in CASES.values() if c[2] == "pass")
    assert set(summary["sandbox"]) >= {"network_isolation", "uid_drop", "workers", "host"}


def test_real_problems_and_truncation(data_dir):
    by_id = {p.question_id: p for p in load_problems(data_dir, limit=60)}
    stdin_ok = ("n = int(input())\ns = input()\nt, a = s.count('T'), s.count('A')\n"
                "if t != a:\n    print('T' if t > a else 'A')\nelse:\n"
                "    print('A' if s[-1] == 'T' else 'T')")
    func_ok = ("class Solution:\n"
               "    def distinctDifferenceArray(self, nums: List[int]) -> List[int]:\n"
               "        return [len(set(nums[:i + 1])) - len(set(nums[i + 1:]))"
               " for i in range(len(nums))]")
    samples = [sample("abc301_a", stdin_ok, 0), sample("2777", func_ok, 0),
               {"problem_id": "2777", "sample_index": 1, "finish_reason": "length",
                "completion": "<think>\nI will write\n```python\nclass Solution: pass\n```"}]
    verdicts, summary = score_samples(by_id, samples, CFG, ks=(1,))
    assert [v["result"] for v in verdicts] == ["pass", "pass", "no_code"]
    assert verdicts[2]["truncated"] and verdicts[2]["no_think_end"]
    assert summary["pass@1"] == pytest.approx((1.0 + 0.5) / 2)
    assert summary["per_difficulty"]["easy"]["num_problems"] == 2
