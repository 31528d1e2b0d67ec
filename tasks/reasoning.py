"""The one rule for reasoning text, shared by every task's scorer (math and code).

Only the text after the last `</think>` is an answer. Without a `</think>`, a reasoning
model (`thinking=True`) never finished and has given no answer; a plain model
(`thinking=False`) answers with its whole text; `thinking=None` decides per output (an
output that opened `<think>` and never closed it is unfinished reasoning).
"""
from __future__ import annotations

THINK_START, THINK_END = "<think>", "</think>"


def answer_text(text: str, thinking: bool | None = False) -> str | None:
    """The part of `text` that is scored, or None when reasoning never finished."""
    text = text or ""
    if THINK_END in text:
        return text.rsplit(THINK_END, 1)[1]
    if thinking or (thinking is None and THINK_START in text):
        return None
    return text
