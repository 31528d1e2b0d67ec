"""Prompts and resumable generation. Each finished sample is appended to samples.jsonl at
once (from the engine's on_sample callback); a rerun generates only what is missing.

Every generate call is a timed *segment*, recorded in generation_stats.jsonl even when it
is interrupted: an open record before it starts, then its wall time, the tokens the engine
generated, the samples it kept, and the conditions it ran under. Each sample row names its
segment and finish time, so a segment whose process was killed is still counted
(tasks/segments.py). Throughput is computed over all segments (tasks/summary.py).
An interrupted call's unfinished samples are regenerated later; their partial work is
counted only if the engine reports it (`llm.last_stats` set for the interrupted call with
`interrupted=True`, `num_output_tokens` counting unfinished samples' tokens too). Without
that report the segment is marked `work_measured: false` and the throughput is a lower
bound, which the summary says.

Requests the engine rejects (an output with `error`, e.g. a prompt over max_model_len) are
recorded as failed samples (finish_reason "error", counted wrong, listed in the summary);
the rejection is deterministic, so they are not retried. Completions the engine returns
neither as samples nor as errors are reported and generated again on the next run.
"""
from __future__ import annotations

import json
import os
import sys
import time
import uuid
from typing import Any

from tasks import conditions, segments
from tasks.base import Problem, Task
from tasks.identity import prompt_hash
from tasks.samples import SAMPLES, STATS, append_jsonl, append_line, read_samples

clock = time.perf_counter  # the segment timer (tests drive it from a fake engine)


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


def problem_seed(seed: int, index: int, n: int) -> int:
    """Problem j's samples use seeds seed + j*n + i: distinct across the whole run."""
    return seed + index * n


def plan_requests(problems, prompts, sampling_cls, sampling_cfg, seed, have=frozenset(),
                  only=None):
    """(prompts, params, owners) for the missing samples; owners[k] = (problem j, first
    sample index, count). A whole problem goes through the engine's n; a partial one is
    topped up one sample at a time with seed base+i, what the engine gives sample i."""
    n = sampling_cfg.n
    reqs, params, owners = [], [], []
    for j, p in enumerate(problems):
        if only is not None and j not in only:
            continue
        missing = [i for i in range(n) if (p.id, i) not in have]
        base = problem_seed(seed, j, n)
        for first, count in [(0, n)] if len(missing) == n else [(i, 1) for i in missing]:
            reqs.append(prompts[j])
            params.append(sampling_cls(n=count, temperature=sampling_cfg.temperature,
                                       top_p=sampling_cfg.top_p,
                                       max_tokens=sampling_cfg.max_tokens, seed=base + first))
            owners.append((j, first, count))
    return reqs, params, owners


def _engine_stats(llm, before, interrupted: bool) -> dict:
    """The engine's stats for the call just made ({} if it left the previous ones)."""
    stats = getattr(llm, "last_stats", None)
    if stats is None or stats is before or (interrupted and not getattr(stats, "interrupted", False)):
        return {}
    return stats.as_dict() if hasattr(stats, "as_dict") else dict(stats)


def timed_generate(llm, reqs, params, job: str, on_sample, record, use_tqdm: bool,
                   opened=None, segment: str | None = None) -> list:
    """llm.generate as one timed segment (id `segment`, else a new one); `opened(open
    record)` runs before it starts, `record(segment)` after it, even if generate raises."""
    seg = {"segment": segment or uuid.uuid4().hex[:12], "event": "close",
           "conditions": conditions.current(job), "num_requests": len(reqs), "kept_samples": 0,
           "kept_output_tokens": 0, "interrupted": False, "error": None}

    def keep(k, comp):
        seg["kept_samples"] += 1
        seg["kept_output_tokens"] += len(comp.token_ids)
        on_sample(k, comp)

    before, t0 = getattr(llm, "last_stats", None), clock()
    seg["start_s"] = t0  # perf_counter: one clock for every process of a host (replicas)
    if opened is not None:
        opened(segments.open_record(seg["segment"], seg["conditions"], t0, len(reqs)))
    try:
        return llm.generate(reqs, params, use_tqdm=use_tqdm, on_sample=keep)
    except BaseException as e:
        seg["interrupted"] = True
        if not isinstance(e, KeyboardInterrupt):
            seg["error"] = f"{type(e).__name__}: {e}"[:200]
        raise
    finally:
        seg["wall_time_s"] = clock() - t0
        stats = _engine_stats(llm, before, seg["interrupted"])
        seg.update({k: v for k, v in stats.items()
                    if k not in ("wall_time_s", "output_tokens_per_s", "interrupted")})
        seg["engine_wall_time_s"] = stats.get("wall_time_s")
        # A finished call kept every token it generated; an interrupted one also threw away
        # its unfinished samples' work, known only from the engine's report.
        seg["work_measured"] = not seg["interrupted"] or "num_output_tokens" in stats
        seg.setdefault("num_output_tokens", seg["kept_output_tokens"])
        record(seg)


def generate_missing(llm: Any, task: Task, problems: list[Problem], prompts: list[list[int]],
                     sampling_cls: Any, sampling_cfg, seed: int, run_dir: str, job: str,
                     use_tqdm: bool = True, only: set[int] | None = None,
                     replica: dict | None = None) -> dict | None:
    """Generate every missing (problem, sample) (of problems `only`, by index, if given);
    returns the segment record or None. `replica` ({"group", "rank", "size"}) tags the
    segment of one data-parallel replica (tasks/replicas.py)."""
    path = os.path.join(run_dir, SAMPLES)
    reqs, params, owners = plan_requests(problems, prompts, sampling_cls, sampling_cfg, seed,
                                         read_samples(path).keys(), only)
    if not reqs:
        return None
    hashes = [prompt_hash(p) for p in prompts]
    written: list[set[int]] = [set() for _ in reqs]

    def write(k: int, index: int, **fields) -> None:
        j, first, _ = owners[k]
        p = problems[j]
        row = {"problem_id": p.id, "sample_index": first + index,
               "seed": problem_seed(seed, j, sampling_cfg.n) + first + index,
               "prompt_tokens": len(reqs[k]), "prompt_hash": hashes[j], **fields}
        if isinstance(p.answer, (str, int, float)):
            row["gold"] = p.answer
        # On disk (page cache) before the next sample starts: survives a kill. Whole lines
        # under a lock: the replicas of a data-parallel run append to the same file.
        append_line(path, json.dumps(row, ensure_ascii=False) + "\n")
        written[k].add(index)

    segment = uuid.uuid4().hex[:12]

    def on_sample(k: int, comp: Any) -> None:
        write(k, comp.index, completion=comp.text, completion_tokens=len(comp.token_ids),
              finish_reason=comp.finish_reason, error=None,
              metrics=dict(getattr(comp, "metrics", None) or {}), segment=segment,
              finish_s=clock())  # the segment's clock: a killed segment is timed from rows

    done: list[dict] = []

    def record(seg: dict) -> None:
        if replica is not None:
            seg["replica"] = dict(replica)
        done.append(seg)
        append_jsonl(os.path.join(run_dir, STATS), seg)

    outs = timed_generate(llm, reqs, params, job, on_sample, record, use_tqdm, opened=record,
                          segment=segment)
    for k, out in enumerate(outs):
        j, first, count = owners[k]
        left = [i for i in range(count) if i not in written[k]]
        if left and getattr(out, "error", None):  # rejected: recorded, counted wrong
            for i in left:
                write(k, i, completion="", completion_tokens=0, finish_reason="error",
                      error=str(out.error))
        elif left:
            print(f"warning: the engine returned no completion for problem "
                  f"{problems[j].id} samples {[first + i for i in left]} and no error; "
                  f"rerun to generate them", file=sys.stderr)
    return done[-1]


def timed_rerun(llm, problems, prompts, sampling_cls, sampling_cfg, seed: int, sample: list[int],
                job: str) -> dict:
    """Time the requests of problems `sample` again (outputs discarded): a re-timing."""
    reqs, params, _ = plan_requests(problems, prompts, sampling_cls, sampling_cfg, seed,
                                    only=set(sample))
    timed: list[dict] = []
    timed_generate(llm, reqs, params, job, lambda k, c: None, timed.append, use_tqdm=False)
    return {**timed[0], "problems": [problems[j].id for j in sample]}
