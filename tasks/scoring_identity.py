"""What determines a run's verdicts, given its samples: the *scoring identity*.

    task, task_version, scorer_version, grader   the task's scoring code and library version
    options      the bound task options (penalize_truncated, thinking, ...)
    timeout_s    scoring.timeout_s, for tasks whose verdicts depend on it (workers never)
    data_sha256  the data file scored against (None for the hub copy)
    golds        per problem, what it is scored against (short answers verbatim, else a hash)
    answer_classes   the rule sorting answers into classes (maj@k, agreement with Full KV),
                 for tasks that have one (math; absent for code, whose identity is unchanged)

summary.json records it (`scoring_identity`), every scores.jsonl row its digest
(`scoring`). A summary, the run's or its Full-KV baseline's, counts only while its identity
is the current one; otherwise the run is scored again (never compared stale), and what
changed is said.
"""
from __future__ import annotations

import dataclasses

from tasks.identity import digest

SHORT_GOLD = 60  # characters kept verbatim; longer golds (a code task's tests) are hashed


def gold_key(gold) -> str:
    if isinstance(gold, (str, int, float)) and not isinstance(gold, bool) \
            and len(str(gold)) <= SHORT_GOLD:
        return str(gold)
    return "sha256:" + digest(gold)


def scoring_identity(task, problems, timeout_s: float, data_sha256: str | None) -> dict:
    ident = {"task": task.name, "task_version": task.version,
             "scorer_version": task.scorer_version, "grader": task.grader(),
             "options": dataclasses.asdict(task.options),
             "timeout_s": timeout_s if task.reads_scoring_timeout else None,
             "data_sha256": data_sha256,
             "golds": {p.id: gold_key(task.gold(p)) for p in problems}}
    rule = getattr(task, "answer_classes_rule", None)
    if rule is not None:  # summaries scored before answer classes existed are scored again
        ident["answer_classes"] = rule
    return {**ident, "digest": digest(ident)}


LABELS = {"task": "the task", "task_version": "the task version",
          "scorer_version": "the task's scorer version", "grader": "the grader",
          "timeout_s": "scoring.timeout_s", "data_sha256": "the data file",
          "answer_classes": "the answer-class rule (maj@k, agreement with Full KV)"}


def _golds(old: dict, new: dict) -> list[str]:
    changed = [f"{pid} ({old[pid]!r} -> {new[pid]!r})" for pid in new
               if pid in old and old[pid] != new[pid]]
    out = []
    if changed:
        more = f" and {len(changed) - 5} more" if len(changed) > 5 else ""
        shown = ", ".join(changed[:5]) + more
        out.append(f"the gold answers of problem(s) {shown}")
    if set(old) != set(new):
        out.append(f"the problems scored ({len(old)} -> {len(new)})")
    return out


def changes(old: dict | None, new: dict) -> list[str]:
    """What differs between a stored scoring identity and the current one, for a person
    (["scored before scoring identities were recorded"] when there is none)."""
    if not old:
        return ["no scoring identity recorded (scored by an older harness)"]
    if old.get("digest") == new["digest"]:
        return []
    out = []
    for key, label in LABELS.items():
        if old.get(key) != new.get(key):
            a, b = old.get(key), new.get(key)
            if key == "data_sha256":
                a, b = f"sha256 {(a or 'none')[:12]}", (b or "none")[:12]
            if key == "answer_classes" and a is None:
                a = "none: scored before maj@k and agreement existed"
            out.append(f"{label} ({a} -> {b})")
    opts_old, opts_new = old.get("options") or {}, new.get("options") or {}
    out += [f"task option {k} ({opts_old.get(k)} -> {opts_new.get(k)})"
            for k in sorted(set(opts_old) | set(opts_new)) if opts_old.get(k) != opts_new.get(k)]
    out += _golds(old.get("golds") or {}, new.get("golds") or {})
    return out or ["the scoring identity"]
