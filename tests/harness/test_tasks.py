"""Tasks are defined in one place (issue 10): the registry and configs/task agree, options
are typed, and math and code share one reasoning rule and one pass@k."""
import glob
import os

import pytest
import yaml

from harness_fixtures import ROOT
from tasks.base import REGISTRY, Problem, get_task


def test_registry_and_hydra_task_configs_agree():
    from tasks.base import known_tasks
    files = {os.path.basename(p)[:-5]: p for p in glob.glob(os.path.join(ROOT, "configs/task/*.yaml"))}
    assert sorted(files) == known_tasks()
    for name, path in files.items():
        body = yaml.safe_load(open(path))
        assert body["name"] == name
        assert set(body) <= {"defaults", "name"}, f"{path} repeats what the task defines"
        task = REGISTRY[name]
        assert isinstance(task.version, int) and task.version >= 1 and task.hf.path


def test_math_tasks_are_values_not_subclasses():
    from tasks.math_tasks import MathTask
    kinds = {type(REGISTRY[n]) for n in ("amc23", "aime24", "aime25", "math500", "gsm8k")}
    assert kinds == {MathTask}
    assert REGISTRY["gsm8k"].question_field == "question"


def test_unknown_or_mistyped_options_are_rejected():
    with pytest.raises(KeyError, match=r"task.options.instrction .*did you mean 'instruction'"):
        get_task("amc23", {"instrction": "x"})
    with pytest.raises(KeyError, match="task.options.timeout_s"):
        get_task("livecodebench", {"timeout_s": "soon"})
    (msg,) = get_task("amc23", {"instruction": "Answer."}).messages(Problem("a", "q"))
    assert msg["content"] == "q\nAnswer."


CLOSED = "<think>```python\nprint(1)\n```\\boxed{1}</think>```python\nprint(2)\n```\\boxed{2}"
OPEN = "<think>```python\nprint(1)\n```\\boxed{1} never closed"
PLAIN = "```python\nprint(3)\n```\\boxed{3}"
# (completion, thinking) -> the answer after the reasoning (program output / box), or None
REGION = [(CLOSED, True, "2"), (CLOSED, False, "2"), (CLOSED, None, "2"),
          (OPEN, True, None), (OPEN, False, "1"), (OPEN, None, None),
          (PLAIN, True, None), (PLAIN, False, "3"), (PLAIN, None, "3")]


@pytest.mark.parametrize("text,thinking,want", REGION)
def test_math_and_code_read_the_same_answer_region(text, thinking, want):
    from tasks.livecodebench.extract import extract_code
    code, _ = extract_code(text, "stop", thinking)
    assert (code.strip()[-2] if code else None) == want
    if thinking is not None:  # math decides per model, not per output
        math = get_task("amc23", {"thinking": thinking})
        (v,) = math.score([{"problem_id": "a", "completion": text, "finish_reason": "stop"}],
                          {"a": Problem("a", "q", want or "7")}, workers=1, timeout=2)
        assert v["correct"] is (want is not None)


def test_one_pass_at_k_for_math_and_code():
    import math
    from tasks import summary
    from tasks.livecodebench import scoring
    assert scoring.pass_at_k is summary.pass_at_k
    assert summary.pass_at_k(64, 3, 32) == pytest.approx(1 - math.comb(61, 32) / math.comb(64, 32))
