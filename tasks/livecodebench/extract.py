"""Code extraction: the last fenced block of the answer (the text after the last </think>).

A thinking model's output without `</think>` never finished reasoning: whatever block it
contains is a draft, so it counts as a failure and is flagged `truncated` (LiveCodeBench
itself does not strip reasoning; we do, as the evaluation spec asks).
"""
from __future__ import annotations

from tasks.reasoning import answer_text


def extract_code(completion: str, finish_reason: str | None = None,
                 thinking: bool | None = None) -> tuple[str | None, dict]:
    """-> (code or None, flags). `thinking`: True for a reasoning model, False for a plain
    one, None to decide per output (reasoning if the text contains `<think>`).

    flags: truncated (finish_reason == "length", or reasoning never closed),
           no_think_end (reasoning never closed), no_code (fewer than two fence lines).
    """
    flags = {"truncated": finish_reason == "length", "no_think_end": False, "no_code": False}
    text = answer_text(completion, thinking)
    if text is None:
        flags.update(truncated=True, no_think_end=True)
        return None, flags
    lines = text.split("\n")
    fences = [i for i, line in enumerate(lines) if "```" in line]
    if len(fences) < 2:
        flags["no_code"] = True
        return None, flags
    code = "\n".join(lines[fences[-2] + 1:fences[-1]])
    if not code.strip():
        flags["no_code"] = True
        return None, flags
    return code, flags
