"""A samples file of 50 completions (correct, wrong, crashing, looping, hostile) is scored
within a stated bound, twice, with identical verdicts."""
import json
import os
import time

from lcb_helpers import problem, sample

from tasks.livecodebench.task import score_samples
from tasks.sandbox import SandboxConfig

BOUND_S = 60  # per scoring pass on 2 cores (measured: about 10 s)
CFG = SandboxConfig(timeout_s=1.0, global_slack_s=2.0, workers=2, lcb_guard=False)
ADD = problem("add", tests=[("1 2\n", "3\n"), ("10 -4\n", "6\n")], difficulty="easy")
PAIR = problem("pair", tests=[("1\n2", "[3, 2]"), ("3\n4", "[7, 12]")], fn_name="calc",
               difficulty="medium")
STEPS = problem("steps", tests=[("1\n", "1\n"), ("2\n", "4\n"), ("3\n", "9\n")],
                difficulty="hard")

ADD_OK = ["a, b = map(int, input().split())\nprint(a + b)  # v{}",
          "import sys\nprint(sum(map(int, sys.stdin.read().split())))  # v{}",
          "print(sum(map(int, open(0).read().split())))  # v{}"]
PAIR_OK = "class Solution:\n    def calc(self, a, b):  # v{}\n        return [a + b, a * b]"
STEPS_OK = "n = int(input())\nprint(n * n)  # v{}"
HOSTILE = [
    "import os, time\nfor _ in range(200):\n    try:\n        if os.fork() == 0:\n"
    "            time.sleep(30)\n            os._exit(0)\n"
    "    except OSError:\n        break\nprint(3)",
    "x = [bytes(100 * 2**20) for _ in range(100)]",
    "for _ in range(1000):\n    print('x' * 10**6)",
    "open('/tmp/zipage-batch-escape', 'w').write('x')\nprint(3)",
    "import os\nos.kill(os.getppid(), 9)\nos.kill(-1, 9)\nprint(3)",
    "import socket\nsocket.create_connection(('127.0.0.1', 9), timeout=1)\nprint(3)",
]


def make_samples():
    rows = []
    add = lambda code: rows.append(sample(code[0].question_id, code[1], len(rows)))  # noqa: E731
    for i in range(15):
        add((ADD, ADD_OK[i % 3].format(i)))
    for i in range(8):
        add((PAIR, PAIR_OK.format(i)))
    for i in range(5):
        add((STEPS, STEPS_OK.format(i)))
    for i in range(8):  # wrong answers
        add((ADD, f"a, b = map(int, input().split())\nprint(a + b + {i + 1})"))
    for i in range(4):  # runtime errors
        add((PAIR, f"class Solution:\n    def calc(self, a, b):\n        return [a // 0, {i}]"))
    add((STEPS, "print(int(input()) **"))
    add((ADD, "def f(:\n    pass"))
    add((STEPS, "while True:\n    pass"))
    add((ADD, "import time\nwhile True:\n    time.sleep(0.01)"))
    for code in HOSTILE:
        add((ADD, code))
    assert len(rows) == 50
    # make it a real samples file round trip
    return [json.loads(json.dumps(r)) for r in rows]


def _run():
    start = time.monotonic()
    verdicts, summary = score_samples([ADD, PAIR, STEPS], make_samples(), CFG, ks=(1, 5))
    return verdicts, summary, time.monotonic() - start


def test_fifty_samples_twice_same_verdicts():
    v1, s1, t1 = _run()
    v2, s2, t2 = _run()
    assert t1 < BOUND_S and t2 < BOUND_S, (t1, t2)
    key = lambda vs: [(v["result"], v["failed_test"], v["tests_passed"]) for v in vs]  # noqa: E731
    assert key(v1) == key(v2)
    results = [v["result"] for v in v1]
    assert results[:28] == ["pass"] * 28
    assert results[28:36] == ["wrong_answer"] * 8
    assert results[36:40] == ["runtime_error"] * 4
    assert results[40:42] == ["compile_error"] * 2
    assert results[42:44] == ["time_limit"] * 2
    assert "pass" not in results[44:]  # hostile programs never pass (none prints "3\n" twice)
    assert s1["results"] == s2["results"] and s1["num_samples"] == 50
    assert not os.path.exists("/tmp/zipage-batch-escape")
    # pass@1 = mean over problems of c/n
    n_add = 15 + 8 + 1 + 1 + 6
    assert abs(s1["pass@1"] - (15 / n_add + 8 / 12 + 5 / 7) / 3) < 1e-9
    assert set(s1["per_difficulty"]) == {"easy", "medium", "hard"}
    print(f"50 samples scored in {t1:.1f}s and {t2:.1f}s; {s1['results']}; {s1['sandbox']}")
