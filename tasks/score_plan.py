"""Score a run folder by its plan (tasks/plan.py): verdicts to scores.jsonl, the summary to
summary.json, both replaced atomically; samples.jsonl is read, never written, so a
generation appending at the same time loses nothing. A summary is checked against its
scoring identity (tasks/scoring_identity.py): the run's, and its Full-KV baseline's. The
answer metrics (answer classes, maj@k, accuracy by length, agreement with Full KV) come from
tasks/answer_metrics.py."""
from __future__ import annotations

import json
import os

from tasks import segments, scoring_identity
from tasks.answer_metrics import NO_AGREEMENT, Answers
from tasks.identity import baseline_mismatch, kv_cache_dtype, read_meta
from tasks.rundir import write_config
from tasks.sample_rows import report as rows_report, select_rows
from tasks.samples import (RETIME, SAMPLES, SCORES, STATS, SUMMARY, read_jsonl_lenient,
                           read_samples, write_atomic, write_jsonl_atomic)
from tasks.summary import compare, engine_errors, summarize, throughput_source


def read_summary(run_dir: str) -> dict | None:
    path = os.path.join(run_dir, SUMMARY)
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            return json.load(f)
    except ValueError:
        return None


def score_run(plan, workers: int | None = None) -> dict:
    """Score with the plan's settings and store them (config.yaml) with the summary."""
    write_config(plan)
    return score(plan, workers)


def score_baseline(base, generated: bool, label: str = "[fullkv]") -> dict:
    """The baseline's summary: reused if it was scored under `base`'s scoring identity,
    else scored again (what changed is printed)."""
    found = read_summary(base.run_dir)
    if not generated and found and \
            (found.get("scoring_identity") or {}).get("digest") == base.scoring["digest"]:
        print(f"{label} reusing cached baseline {base.run_dir}", flush=True)
        return found
    return score_run(base)


def score(plan, workers: int | None = None) -> dict:
    run_dir, cfg, task = plan.run_dir, plan.cfg, plan.task
    meta = read_meta(run_dir) or {}
    problems = {p.id: p for p in plan.problems}
    samples = read_samples(os.path.join(run_dir, SAMPLES))
    known = meta.get("prompt_hashes") or {}
    sel = select_rows(samples.rows, {pid: known.get(pid) for pid in problems}, cfg.sampling.n)
    workers = workers or cfg.scoring.workers or os.cpu_count() or 1
    verdicts = task.score(sel.rows, problems, workers=workers,
                          timeout=cfg.scoring.timeout_s) if sel.rows else []
    order = {pid: i for i, pid in enumerate(problems)}  # data order, then sample index
    pairs = sorted(zip(sel.rows, verdicts), key=lambda rv: (order[rv[0]["problem_id"]],
                                                            rv[0]["sample_index"]))
    # each verdict gains its sample's answer class (maj@k, agreement) where the task has them
    answers = Answers.of(task, pairs, workers=workers, timeout=cfg.scoring.timeout_s)
    pairs = answers.pairs
    digest = plan.scoring["digest"]
    write_jsonl_atomic(os.path.join(run_dir, SCORES), [
        {"problem_id": r["problem_id"], "sample_index": r["sample_index"], "line": r["line"],
         **v, "scoring": digest} for r, v in pairs])
    scored = answers.scored
    changed = _changes_since_last(run_dir, plan.scoring)

    e = cfg.engine
    s = {"task": cfg.task.name, "model": plan.model_label, "engine": e.name, "budget": e.budget,
         "block_size": e.block_size, "kv_cache_dtype": kv_cache_dtype(cfg), "n": cfg.sampling.n,
         "max_tokens": cfg.sampling.max_tokens, "temperature": cfg.sampling.temperature,
         "seed": cfg.seed, "device": plan.device, "run_dir": run_dir,
         "cpu_clamps": list(plan.clamps), "notes": list(plan.notes),
         "data_file": plan.data_file, "data_sha256": plan.data_sha256}
    if meta.get("data_sha256") and meta["data_sha256"] != plan.data_sha256:
        s["data_sha256_at_generation"] = meta["data_sha256"]
    records = read_jsonl_lenient(os.path.join(run_dir, STATS))
    segs = segments.all_segments(records, samples.rows)
    s.update(summarize(scored, len(problems), cfg.sampling.n, segs))
    s.update(answers.summary_fields(cfg.sampling.n, cfg.sampling.max_tokens))
    live = segments.running(records)  # a generation appending now (its time is not known yet)
    s.update(segments.untimed(segs, scored, live), running_segments=len(live))
    s["engine_errors"] = engine_errors(scored)
    s["samples_file"] = {
        "unreadable_lines": [{"line": n, "why": why} for n, why in samples.bad_lines],
        "incomplete_last_line": samples.torn_tail, **rows_report(sel)}
    s.update(task.summary_extras([r for r, _ in pairs], [v for _, v in pairs], problems))
    s["scoring_identity"] = plan.scoring
    s["rescored_because"] = changed
    s["baseline"] = baseline_block(plan, s, segs, answers)
    write_atomic(os.path.join(run_dir, SUMMARY), json.dumps(s, indent=2) + "\n")
    return s


def _changes_since_last(run_dir: str, current: dict) -> list[str]:
    """What changed since the folder's summary was last scored (printed; [] if nothing)."""
    last = read_summary(run_dir)
    if last is None:
        return []
    changed = scoring_identity.changes(last.get("scoring_identity"), current)
    if changed:
        print(f"note: {run_dir} scored again: since its last scoring, {'; '.join(changed)} "
              f"changed", flush=True)
    return changed


def baseline_block(plan, s: dict, segs: list[dict], answers: Answers) -> dict:
    if plan.cfg.engine.budget is None:  # a Full-KV run is its own baseline
        return {**compare(s, s), "run_dir": s["run_dir"], **answers.agreement_with_itself(),
                "throughput_source": "this run (Full KV is its own baseline)"}
    base = plan.baseline
    base_dir = base.run_dir if base else None
    found = read_summary(base_dir) if base_dir else None
    if found is None:
        return {**compare(s, {}), "run_dir": base_dir, "status": "not computed", **NO_AGREEMENT}
    block = {**compare(s, found), "run_dir": base_dir}
    stale = scoring_identity.changes(found.get("scoring_identity"), base.scoring)
    changed = baseline_mismatch(read_meta(plan.run_dir), read_meta(base_dir))
    if changed or stale:
        why = (f"{'; '.join(changed)} differ" if changed else
               f"it was scored under another scoring identity ({'; '.join(stale)})")
        block.update(status=f"not comparable: {why}", speedup=None, accuracy_retained=None,
                     time_to_finish_speedup=None, accuracy_by_length=None, **NO_AGREEMENT)
        return block
    block.update(answers.agreement_with(base))
    retime_path = os.path.join(plan.run_dir, RETIME)
    retime = json.load(open(retime_path)) if os.path.exists(retime_path) else None
    base_segs = segments.all_segments(read_jsonl_lenient(os.path.join(base_dir, STATS)),
                                      read_samples(os.path.join(base_dir, SAMPLES)).rows)
    source = throughput_source(segs, base_segs, retime)
    if source.get("speedup") is not None:
        block["speedup_from_generation"] = block["speedup"]
    block.update(source)
    return block
