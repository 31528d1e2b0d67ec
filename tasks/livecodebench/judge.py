"""Verdicts with LiveCodeBench's comparison rules, computed in the evaluator (the child never
sees the expected outputs).

Result codes follow LiveCodeBench: 1 pass (its `True`), -1 global timeout, -2 wrong answer
(also compile error / no code), -3 time limit, -4 runtime error, -5 runner error.
The first failing test decides; the run is stopped there.
"""
from __future__ import annotations

import json
import signal
from decimal import Decimal, InvalidOperation

from tasks.livecodebench.data import LCBProblem

CODES = {"pass": 1, "global_timeout": -1, "wrong_answer": -2, "compile_error": -2,
         "no_code": -2, "time_limit": -3, "runtime_error": -4, "runner_error": -5}


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.strip().split("\n")]


def stdin_output_matches(output: str, expected: str) -> bool:
    """Line-wise after strip; a line matches exactly or token-wise by Decimal equality
    (exact decimal value: 1.0 == 1, but 0.333 != 0.3333)."""
    got, want = _lines(output), _lines(expected)
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if g == w:
            continue
        gt, wt = g.split(), w.split()
        if len(gt) != len(wt):
            return False
        try:
            if any(Decimal(a) != Decimal(b) for a, b in zip(gt, wt)):
                return False
        except (InvalidOperation, ValueError):
            return False
    return True


class _Opaque:
    """A result the child could not express (custom object): equal to nothing."""

    def __eq__(self, other):
        return False

    __hash__ = object.__hash__


def decode_value(v):
    """Inverse of the child's tagged encoding (tasks/sandbox/programs.encode)."""
    if isinstance(v, list):
        return [decode_value(x) for x in v]
    if not isinstance(v, dict):
        return v
    (tag, x), = v.items()
    if tag == "$int":
        return int(x, 16)
    if tag == "$tuple":
        return tuple(decode_value(e) for e in x)
    if tag == "$set":
        return {decode_value(e) for e in x}
    if tag == "$frozenset":
        return frozenset(decode_value(e) for e in x)
    if tag == "$dict":
        return {decode_value(k): decode_value(e) for k, e in x}
    return _Opaque()


def _parse_int(s: str) -> int:
    return int(s) if len(s) < 4000 else int(Decimal(s))  # no int-str digit limit here


def functional_output_matches(encoded, expected: str) -> bool:
    """`result == json.loads(expected)` (the child already turned a tuple into a list)."""
    try:
        return decode_value(encoded) == json.loads(expected, parse_int=_parse_int)
    except (ValueError, TypeError, RecursionError):
        return False


class Judge:
    """Streams a run's per-test messages; `on_test` returns False at the first failure."""

    def __init__(self, problem: LCBProblem):
        self.problem = problem
        self.passed = 0
        self.failure: tuple[str, str, int] | None = None   # (result, reason, test index)

    def on_test(self, msg: dict) -> bool:
        i, status = msg["test"], msg["status"]
        if status == "ok":
            expected = self.problem.tests[i]["output"]
            ok = (functional_output_matches(msg["output"], expected)
                  if self.problem.mode == "functional"
                  else stdin_output_matches(msg["output"] or "", expected))
            if ok:
                self.passed += 1
                return True
            self.failure = ("wrong_answer", f"wrong answer on test {i}", i)
        elif status == "timeout":
            self.failure = ("time_limit", f"time limit on test {i}", i)
        elif status == "output_limit":
            self.failure = ("wrong_answer", f"output limit on test {i}: {msg['error']}", i)
        else:
            self.failure = ("runtime_error", f"test {i}: {msg['error']}", i)
        return False

    def verdict(self, res) -> dict:
        """Verdict fields from the final RunResult (tasks.sandbox.RunResult)."""
        n = len(self.problem.tests)
        if self.failure:
            result, reason, failed = self.failure
        elif res.end == "done" and self.passed == n:
            result, reason, failed = "pass", "", None
        elif res.end == "compile_error":
            result, reason, failed = "compile_error", res.error or "", None
        elif res.end == "global_timeout":
            result, reason, failed = "global_timeout", "wall-clock limit of the run", self.passed
        elif res.end == "crashed" and res.exit_code == 128 + signal.SIGXCPU:
            result, reason, failed = "global_timeout", "CPU-time limit of the run", self.passed
        elif res.end == "crashed":
            result, reason, failed = ("runtime_error",
                                      f"process died (exit status {res.exit_code})", self.passed)
        else:
            result, reason, failed = "runner_error", f"{res.end}: {res.error or ''}", None
        return {"passed": result == "pass", "result": result, "result_code": CODES[result],
                "reason": reason[:500], "failed_test": failed, "tests_passed": self.passed,
                "num_tests": n, "run_time_s": round(res.wall_s, 3)}
