"""Gold answers of hub copies whose answer column is not the bare answer. The local copies
hold the bare answer (../shared/datasets/README.md); these rules make a hub row the same:
openai/gsm8k's `answer` is the worked solution ending in `#### N`, math-ai/aime24 has no
`answer` column but a `solution` of the form `\\boxed{N}`, and a float such as `27.0` in an
answer column means the integer 27 (as the local copies write it). These columns come from
public code that loads the sets; the hub was not reachable to check them (2026-12-07)."""
from __future__ import annotations

from tasks.base import DataError
from tasks.math_grader import last_boxed


def after_hashes(text: str) -> str | None:
    """GSM8K: the text after the last `####`, thousands separators removed."""
    if "####" not in text:
        return None
    return text.rsplit("####", 1)[1].strip().replace(",", "") or None


def boxed(text: str) -> str | None:
    """The content of the last `\\boxed{...}`."""
    return (last_boxed(text) or "").strip() or None


RULES = {"after_hashes": after_hashes, "boxed": boxed}


def gold_answer(value, rule: str | None, where: str):
    """The bare answer of a hub row's answer column: an integral float as its integer, a
    `rule` (RULES; None or "none": the column is the answer) applied to a string;
    DataError naming the row if the rule finds none."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if rule in (None, "none"):
        return value
    if rule not in RULES:
        raise DataError(f"task.hf.answer_rule={rule}: one of {', '.join(RULES)}, none")
    found = RULES[rule](str(value))
    if found is None:
        raise DataError(f"{where}: answer rule {rule!r} found no answer in "
                        f"{str(value)[-80:]!r}; a copy whose answer column is the bare answer "
                        f"takes task.hf.answer_rule=none")
    return found
