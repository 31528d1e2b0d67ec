"""Grade one math sample. Runs inside a worker process (math-verify uses signal.alarm,
which only works in a process's main thread), so it imports no engine code."""
from __future__ import annotations

import re
import time

from tasks.reasoning import answer_text

_INT = re.compile(r"^[+-]?\d+(\.0+)?$")


def last_boxed(text: str) -> str | None:
    """Content of the last \\boxed{...} / \\fbox{...}, braces matched; None if absent."""
    start = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if start < 0:
        return None
    i = text.find("{", start)
    if i < 0:
        return None
    depth = 0
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i + 1:j]
    return None  # unclosed box (e.g. cut off mid-answer)


def _strict_int(s: str | None) -> int | None:
    s = (s or "").strip().strip("$").replace(",", "").strip()
    return int(float(s)) if _INT.match(s) else None


def parse_answer(text: str, timeout: int) -> list:
    """math-verify's parse of a bare answer (a gold answer, or a sample's extracted answer):
    as LaTeX first, then as a plain expression (plain numbers that fail as LaTeX).
    Empty when it cannot be parsed."""
    from math_verify import ExprExtractionConfig, parse
    found = parse(f"${text}$", parsing_timeout=timeout)
    return found or parse(text, [ExprExtractionConfig()], parsing_timeout=timeout)


def grade(item: dict) -> dict:
    """item: text, finish_reason, gold, timeout (s), penalize_truncated, thinking -> verdict."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    timeout = max(1, int(round(item.get("timeout", 5))))
    region = answer_text(item["text"], item.get("thinking", False)) or ""
    truncated = item["finish_reason"] == "length"
    boxed = last_boxed(region)
    verdict = {"correct": False, "correct_lenient": False, "extracted_answer": None,
               "truncated": truncated, "has_boxed": boxed is not None, "error": None}
    gold_text = str(item["gold"]).strip()
    try:
        gold = parse_answer(gold_text, timeout)
        if not gold:
            verdict["error"] = f"unparsable gold answer {gold_text!r}"
            return verdict
        # Boxed first; the plain-expression fallback only if there is no box at all.
        t0 = time.monotonic()
        pred = parse(region, [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()],
                     parsing_timeout=timeout)
        if not pred and time.monotonic() - t0 >= 0.9 * timeout:
            verdict["error"] = f"timeout: parsing the answer took over {timeout}s"
        if pred:
            verdict["extracted_answer"] = str(pred[-1])
            t0 = time.monotonic()
            ok = bool(verify(gold, pred, timeout_seconds=timeout))
            if not ok and time.monotonic() - t0 >= 0.9 * timeout:
                verdict["error"] = f"timeout: verifying took over {timeout}s"
            verdict["correct_lenient"] = ok
            verdict["correct"] = ok and not (truncated and item.get("penalize_truncated", True))
        elif boxed is not None and verdict["error"] is None:
            verdict["extracted_answer"] = boxed
            verdict["error"] = "unparsable answer"
    except Exception as e:  # math-verify raises on timeouts only with raise_on_error; be safe
        verdict["error"] = f"{type(e).__name__}: {e}"[:200]
    g_int = _strict_int(gold_text)
    if g_int is not None and boxed is not None:
        verdict["strict_int_match"] = _strict_int(boxed) == g_int
    return verdict


def warmup() -> None:
    """Pool initializer: import math-verify and run one grade, so a worker's first real
    sample does not spend its timeout on sympy's first-use setup."""
    grade({"text": "\\boxed{(1, \\frac{\\pi}{2})}", "finish_reason": "stop",
           "gold": "\\left( 1, \\frac{\\pi}{2} \\right)", "timeout": 5})
