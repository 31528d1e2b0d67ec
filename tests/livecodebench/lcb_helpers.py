"""Small builders shared by the LiveCodeBench tests."""
import json
import os

from tasks.livecodebench.data import LCBProblem


def problem(qid="p", tests=(("1 2\n", "3\n"),), fn_name=None, difficulty="easy"):
    kind = "functional" if fn_name else "stdin"
    return LCBProblem(question_id=qid, title=qid, content="add two numbers", platform="atcoder",
                      contest_id="c", contest_date="2024-01-01T00:00:00", difficulty=difficulty,
                      starter_code="", fn_name=fn_name, num_public=len(tests),
                      tests=[{"input": i, "output": o, "testtype": kind} for i, o in tests])


def fenced(code, think=True):
    pre = "<think>\nlet me think ```python\nprint('draft')\n```\n</think>\n" if think else ""
    return f"{pre}Here is my solution:\n```python\n{code}\n```\n"


def sample(pid, code, index=0, finish_reason="stop", think=True):
    return {"problem_id": pid, "sample_index": index, "completion": fenced(code, think),
            "finish_reason": finish_reason}


def process_count():
    return sum(1 for n in os.listdir("/proc") if n.isdigit())


def write_jsonl(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write((r if isinstance(r, str) else json.dumps(r)) + "\n")
