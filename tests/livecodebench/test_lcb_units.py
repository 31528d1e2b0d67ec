"""Pure functions: prompts, code extraction, comparison rules, value encoding, pass@k."""
import json
import math

import pytest
from lcb_helpers import problem

from tasks.livecodebench.judge import decode_value, functional_output_matches, stdin_output_matches
from tasks.livecodebench.scoring import pass_at_k
from tasks.livecodebench.task import build_messages, extract_code
from tasks.sandbox.programs import encode, wrap_stdin_program


def test_prompts_with_and_without_starter_code():
    stdin = problem()
    msgs = build_messages(stdin)
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert "standard input" in msgs[1]["content"] and "# YOUR CODE HERE" in msgs[1]["content"]
    leet = problem(fn_name="f")
    leet.starter_code = "class Solution:\n    def f(self, a: int) -> int:\n        "
    user = build_messages(leet, system=False)
    assert len(user) == 1 and "starter code" in user[0]["content"]
    assert "class Solution:\n    def f(self, a: int) -> int:\n```" in user[0]["content"]


def test_extract_last_block_after_think():
    text = ("<think>```python\ndraft()\n```</think>\n"
            "A\n```python\nfirst()\n```\nB\n```py\nlast()\n```")
    assert extract_code(text, "stop") == ("last()", {"truncated": False, "no_think_end": False,
                                                     "no_code": False})
    # the reasoning was cut off: its draft block must not be used
    code, flags = extract_code("<think>hmm ```python\nx=1\n```", "length")
    assert code is None and flags["truncated"] and flags["no_think_end"]
    code, flags = extract_code("```python\nx=1\n```", "length", thinking=True)
    assert code is None and flags["no_think_end"]
    # a plain model: whole text; truncation is only flagged
    code, flags = extract_code("sure\n```python\nx=1\n```\nand then", "length", thinking=False)
    assert code == "x=1" and flags["truncated"] and not flags["no_code"]
    assert extract_code("no code here</think> at all", "stop")[1]["no_code"]
    assert extract_code("</think>```python\n```", "stop")[0] is None


def test_stdin_comparison_rules():
    assert stdin_output_matches("3\n", "3")
    assert stdin_output_matches("  1 2 \r\n3\n\n", "1 2\n3")
    assert stdin_output_matches("1.0 2", "1 2.000")          # Decimal equality
    assert not stdin_output_matches("0.3333333", "0.33333333")  # but no tolerance
    assert not stdin_output_matches("1 2", "1  2 3")
    assert not stdin_output_matches("3\n4", "3")
    assert not stdin_output_matches("Yes", "YES")
    assert stdin_output_matches("nan", "nan ")                 # identical text matches
    assert not stdin_output_matches("NaN 1", "nan 1")          # Decimal NaN != NaN


@pytest.mark.parametrize("value, expected, same", [
    ([1, 2], "[1, 2]", True),
    ((1, 2), "[1, 2]", False),            # the child lists only a top-level tuple
    ([(1, 2)], "[[1, 2]]", False),        # Python: (1, 2) != [1, 2]
    (True, "1", True),                    # Python: True == 1
    (1.0, "1", True),
    (0.1 + 0.2, "0.3", False),            # no float tolerance
    (10 ** 5000, "BIG", True),           # past the int-str digit limit
    ({1: 2}, '{"1": 2}', False),          # int key != str key
    ({"a": [1]}, '{"a": [1]}', True),
    ({1, 2}, "[1, 2]", False),
    (None, "null", True),
], ids=lambda x: type(x).__name__)
def test_functional_equality_matches_python(value, expected, same):
    if expected == "BIG":
        expected = "1" + "0" * 5000
    assert decode_value(json.loads(json.dumps(encode(value)))) == value
    assert functional_output_matches(encode(value), expected) is same


def test_opaque_results_never_match():
    class Point:
        pass
    assert not functional_output_matches(encode(Point()), "{}")


def test_stdin_wrapping_keeps_imports_and_unwraps_main():
    src = wrap_stdin_program("import sys\nx = 1\nif __name__ == '__main__':\n    print(x)\n")
    body = src.split("sys.setrecursionlimit(50000)\n", 1)[1]
    assert body.split() == "import sys def wrapped_function(): x = 1 print(x)".split()


def test_pass_at_k():
    assert pass_at_k(10, 0, 1) == 0.0 and pass_at_k(10, 10, 5) == 1.0
    assert math.isclose(pass_at_k(10, 3, 1), 0.3)
    assert math.isclose(pass_at_k(5, 2, 2), 1 - math.comb(3, 2) / math.comb(5, 2))
    assert pass_at_k(4, 3, 2) == 1.0
