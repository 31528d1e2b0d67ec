"""Prompts and resumable generation: each finished sample is appended to samples.jsonl at
once (from the engine's on_sample callback), and a rerun only generates what is missing."""
from __future__ import annotations

import json
import os
from typing import Any

from tasks.base import Problem, Task


def build_prompt_ids(tokenizer: Any, task: Task, problem: Problem, model_cfg) -> list[int]:
    """Chat-template the task's messages and tokenize (token ids avoid a doubled BOS)."""
    msgs = list(task.messages(problem))
    if model_cfg.system_prompt:
        msgs.insert(0, {"role": "system", "content": model_cfg.system_prompt})
    kwargs = dict(model_cfg.chat_template_kwargs or {})
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True,
                                             **kwargs)
    else:  # no template shipped: plain turns, still ending where the answer starts
        text = "".join(f"{m['role']}: {m['content']}\n" for m in msgs) + "assistant: "
        if getattr(tokenizer, "bos_token", None):
            text = tokenizer.bos_token + text
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def read_rows(path: str) -> list[dict]:
    """Rows of a samples file; a torn last line (killed mid-write) is dropped; the first row
    of a (problem_id, sample_index) wins."""
    rows, seen = [], set()
    if not os.path.exists(path):
        return rows
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            key = (r.get("problem_id"), r.get("sample_index"))
            if key not in seen:
                seen.add(key)
                rows.append(r)
    return rows


def write_rows(path: str, rows: list[dict]) -> None:
    """Atomic rewrite (used after scoring adds verdicts)."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def _repair_tail(path: str) -> None:
    """Cut a partial last line so appended rows start on a fresh line."""
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return
    with open(path, "rb+") as f:
        data = f.read()
        if not data.endswith(b"\n"):
            f.truncate(data.rfind(b"\n") + 1)


def problem_seed(seed: int, index: int, n: int) -> int:
    """Problem j's samples use seeds seed + j*n + i: distinct across the whole run."""
    return seed + index * n


def generate_missing(llm: Any, task: Task, problems: list[Problem], prompts: list[list[int]],
                     sampling_cls: Any, sampling_cfg, seed: int, path: str,
                     use_tqdm: bool = True) -> dict | None:
    """Generate every missing (problem, sample); returns the engine's stats or None."""
    n = sampling_cfg.n
    done = {(r["problem_id"], r["sample_index"]) for r in read_rows(path)}
    reqs, params, owners = [], [], []  # owners[k] = (problem, first index, seed, count)
    for j, p in enumerate(problems):
        missing = [i for i in range(n) if (p.id, i) not in done]
        base = problem_seed(seed, j, n)
        # A whole problem goes through the engine's n; a partial one is topped up one sample
        # at a time with seed base+i, which is what the engine would have used for sample i.
        groups = [(0, n)] if len(missing) == n else [(i, 1) for i in missing]
        for first, count in groups:
            reqs.append(prompts[j])
            params.append(sampling_cls(n=count, temperature=sampling_cfg.temperature,
                                       top_p=sampling_cfg.top_p, max_tokens=sampling_cfg.max_tokens,
                                       seed=base + first))
            owners.append((p, first, base + first, count))
    if not reqs:
        return None
    _repair_tail(path)
    with open(path, "a", encoding="utf-8") as f:
        def write(p: Problem, index: int, seed_: int, plen: int, **fields) -> None:
            row = {"problem_id": p.id, "sample_index": index, "seed": seed_, "prompt_tokens": plen,
                   **fields}
            if isinstance(p.answer, (str, int, float)):
                row["gold"] = p.answer
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            f.flush()  # on disk (page cache) before the next sample: survives a kill

        def on_sample(k: int, comp: Any) -> None:
            p, first, s, _ = owners[k]
            write(p, first + comp.index, s + comp.index, len(reqs[k]),
                  completion=comp.text, completion_tokens=len(comp.token_ids),
                  finish_reason=comp.finish_reason, error=None,
                  metrics=dict(getattr(comp, "metrics", None) or {}))

        outs = llm.generate(reqs, params, use_tqdm=use_tqdm, on_sample=on_sample)
        for k, out in enumerate(outs):
            if getattr(out, "error", None):  # recorded as failed samples, not fatal
                p, first, s, count = owners[k]
                for i in range(count):
                    write(p, first + i, s + i, len(reqs[k]), completion="",
                          completion_tokens=0, finish_reason="error", error=str(out.error))
    stats = getattr(llm, "last_stats", None)
    d = stats.as_dict() if hasattr(stats, "as_dict") else dict(stats or {})
    d["num_requests"] = len(reqs)
    return d
