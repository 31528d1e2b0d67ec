"""LiveCodeBench-style prompts (our own wording): with starter code (LeetCode) the model
completes the stub; without it (AtCoder, Codeforces) it writes a stdin -> stdout program."""
from __future__ import annotations

from tasks.livecodebench.data import LCBProblem

SYSTEM_PROMPT = ("You are an expert Python programmer. Given a programming problem, you write "
                 "a correct and efficient Python 3 program that meets the specification and "
                 "passes all of its tests.")

_STARTER = ("### Format\nComplete the following starter code and put your whole solution in "
            "one Python code block delimited by triple backticks.\n```python\n{starter}\n```")
_STDIN = ("### Format\nRead the input from standard input, solve the problem and write the "
          "answer to standard output (do not test the program on the sample inputs yourself). "
          "Put your whole program in one Python code block delimited by triple backticks.\n"
          "```python\n# YOUR CODE HERE\n```")


def user_prompt(problem: LCBProblem) -> str:
    fmt = (_STARTER.format(starter=problem.starter_code.rstrip()) if problem.starter_code
           else _STDIN)
    return (f"### Question\n{problem.content.strip()}\n\n{fmt}\n\n"
            "### Answer (a Python code block in triple backticks)\n")


def build_messages(problem: LCBProblem, system: bool = True) -> list[dict]:
    """Chat messages; `system=False` folds the instruction into the user turn (for models
    run without a system prompt, e.g. R1-style reasoning models)."""
    if system:
        return [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": user_prompt(problem)}]
    return [{"role": "user", "content": f"{SYSTEM_PROMPT}\n\n{user_prompt(problem)}"}]
