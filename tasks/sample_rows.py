"""Which row of samples.jsonl is scored for each (problem, sample index): a stated rule,
never a silent choice (issue 29, item 8).

    1. A row counts only if it carries its problem's prompt hash: the one run.json records
       for the problem (`prompt_hashes`, written when samples are generated); a row without
       it, or with another, is kept on disk, not scored, and reported by line.
    2. One counting row: it is scored.
    3. Several counting rows with the same sample (completion, finish reason, tokens,
       seed): the first is scored; the repeats are reported as identical duplicates.
    4. Several counting rows that differ: a conflict; none is scored (the sample counts as
       missing) and the lines are reported, so a person decides which to delete.

Folders from before run.json recorded prompt hashes: every row with a prompt hash counts.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

RULE = ("a row counts only with its problem's prompt_hash (run.json); of identical counting "
        "rows the first is scored; counting rows that differ are a conflict and none is scored")
SAME_SAMPLE = ("completion", "finish_reason", "completion_tokens", "seed", "error")


@dataclass
class Selection:
    rows: list[dict] = field(default_factory=list)        # scored, one per (problem, index)
    ignored: list[dict] = field(default_factory=list)     # outside this run's problems or n
    unmatched: list[dict] = field(default_factory=list)   # without this run's prompt hash
    duplicates: list[dict] = field(default_factory=list)  # identical repeats and conflicts


def _why_unmatched(row: dict, want: str | None) -> str | None:
    got = row.get("prompt_hash")
    if not isinstance(got, str):
        return "no prompt_hash"
    if want is not None and got != want:
        return f"prompt_hash {got} is not this problem's prompt ({want})"
    return None


def select_rows(rows: list[dict], reference: dict[str, str | None], n: int) -> Selection:
    """`rows`: every readable row (with its `line`); `reference`: problem id -> its prompt
    hash (None: unknown) for every problem of the run; `n`: samples per problem."""
    out = Selection()
    by_key: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        pid, index = r["problem_id"], r["sample_index"]
        if pid not in reference or index >= n:
            out.ignored.append(r)
            continue
        why = _why_unmatched(r, reference[pid])
        if why:
            out.unmatched.append({"line": r["line"], "problem_id": pid, "sample_index": index,
                                  "why": why})
        else:
            by_key[pid, index].append(r)
    for (pid, index), found in by_key.items():
        if len(found) > 1:
            same = len({tuple(str(r.get(k)) for k in SAME_SAMPLE) for r in found}) == 1
            out.duplicates.append({"problem_id": pid, "sample_index": index,
                                   "lines": [r["line"] for r in found],
                                   "kind": "identical" if same else "conflict",
                                   "scored_line": found[0]["line"] if same else None})
            if not same:
                continue
        out.rows.append(found[0])
    return out


def report(sel: Selection) -> dict:
    """The summary's account of the rows it did not score, or scored once for several."""
    return {"rule": RULE,
            "ignored": [{"line": r["line"], "problem_id": r["problem_id"],
                         "sample_index": r["sample_index"]} for r in sel.ignored],
            "unmatched": sel.unmatched, "duplicate_rows": sel.duplicates,
            "duplicates": sum(len(d["lines"]) - 1 for d in sel.duplicates),
            "conflicts": sum(1 for d in sel.duplicates if d["kind"] == "conflict")}
