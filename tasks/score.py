"""Score a run folder from its samples: `python -m tasks.score RUN_DIR`.

Works on finished, partial and still-generating runs alike: it reads samples.jsonl and
never writes it (verdicts go to scores.jsonl, the summary to summary.json, both replaced
atomically), so a generation appending at the same time loses nothing. Lines it cannot use
are kept and reported with their line numbers.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from omegaconf import OmegaConf

from tasks.base import DataError
from tasks.identity import baseline_mismatch, kv_cache_dtype, read_meta
from tasks.prepare import ConfigError, load_problems, task_from_config
from tasks.samples import (CONFIG, META, RETIME, SAMPLES, SCORES, STATS, SUMMARY, read_jsonl_lenient,
                           read_samples, write_atomic, write_jsonl_atomic)
from tasks.summary import compare, engine_errors, summarize, throughput_source

class NotARunFolder(ValueError):
    pass


def check_run_folder(run_dir: str) -> None:
    if not os.path.isdir(run_dir):
        raise NotARunFolder(f"no run folder at {run_dir}")
    missing = [f for f in (CONFIG, META) if not os.path.exists(os.path.join(run_dir, f))]
    if missing:
        raise NotARunFolder(f"{run_dir} is not a run folder: {' and '.join(missing)} missing "
                            f"(run.py writes them when the run's first samples are generated)")


def samples_report(samples, ignored: list[dict]) -> dict:
    return {"unreadable_lines": [{"line": n, "why": why} for n, why in samples.bad_lines],
            "ignored": [{"line": r["line"], "problem_id": r["problem_id"],
                         "sample_index": r["sample_index"]} for r in ignored],
            "duplicates": samples.duplicates, "incomplete_last_line": samples.torn_tail}


def rescore(run_dir: str, workers: int | None = None, timeout: float | None = None) -> dict:
    check_run_folder(run_dir)
    cfg = OmegaConf.load(os.path.join(run_dir, CONFIG))
    meta = read_meta(run_dir)
    task = task_from_config(cfg)
    problems = {p.id: p for p in load_problems(cfg, task)}
    samples = read_samples(os.path.join(run_dir, SAMPLES))
    n = cfg.sampling.n
    rows = [r for r in samples.rows if r["problem_id"] in problems and r["sample_index"] < n]
    ignored = [r for r in samples.rows if r["problem_id"] not in problems or r["sample_index"] >= n]
    workers = workers or cfg.scoring.workers or os.cpu_count() or 1
    verdicts = task.score(rows, problems, workers=workers,
                          timeout=timeout or cfg.scoring.timeout_s) if rows else []
    order = {pid: i for i, pid in enumerate(problems)}  # data order, then sample index
    pairs = sorted(zip(rows, verdicts), key=lambda rv: (order[rv[0]["problem_id"]],
                                                        rv[0]["sample_index"]))
    write_jsonl_atomic(os.path.join(run_dir, SCORES), [
        {"problem_id": r["problem_id"], "sample_index": r["sample_index"], "line": r["line"], **v}
        for r, v in pairs])
    scored = [{**r, **v} for r, v in pairs]

    s = {"task": cfg.task.name, "model": cfg.model.name, "engine": cfg.engine.name,
         "budget": cfg.engine.budget, "block_size": cfg.engine.block_size,
         "kv_cache_dtype": kv_cache_dtype(cfg),
         "n": n, "max_tokens": cfg.sampling.max_tokens,
         "temperature": cfg.sampling.temperature, "seed": cfg.seed, "device": meta.get("device"),
         "run_dir": os.path.abspath(run_dir), "cpu_clamps": meta.get("cpu_clamps", []),
         "data_file": meta.get("data_file"), "data_sha256": meta.get("data_sha256")}
    segments = read_jsonl_lenient(os.path.join(run_dir, STATS))
    s.update(summarize(scored, len(problems), n, segments))
    s["engine_errors"] = engine_errors(scored)
    s["samples_file"] = samples_report(samples, ignored)
    s.update(task.summary_extras([r for r, _ in pairs], [v for _, v in pairs], problems))
    s["baseline"] = baseline_block(s, run_dir, meta, segments)
    write_atomic(os.path.join(run_dir, SUMMARY), json.dumps(s, indent=2) + "\n")
    return s


def baseline_block(s: dict, run_dir: str, meta: dict, segments: list[dict]) -> dict:
    if s["budget"] is None:  # a Full-KV run is its own baseline
        return {**compare(s, s), "run_dir": s["run_dir"],
                "throughput_source": "this run (Full KV is its own baseline)"}
    base_dir = meta.get("baseline_dir")
    path = os.path.join(base_dir or "", SUMMARY)
    if not base_dir or not os.path.exists(path):
        return {**compare(s, {}), "run_dir": base_dir, "status": "not computed"}
    with open(path) as f:
        block = {**compare(s, json.load(f)), "run_dir": base_dir}
    changed = baseline_mismatch(meta, read_meta(base_dir))
    if changed:
        block.update(status=f"not comparable: {'; '.join(changed)} differ", speedup=None,
                     accuracy_retained=None, time_to_finish_speedup=None)
        return block
    retime_path = os.path.join(run_dir, RETIME)
    retime = json.load(open(retime_path)) if os.path.exists(retime_path) else None
    source = throughput_source(segments, read_jsonl_lenient(os.path.join(base_dir, STATS)), retime)
    if source.get("speedup") is not None:
        block["speedup_from_generation"] = block["speedup"]
    block.update(source)
    return block


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--timeout", type=float, default=None, help="per-sample math-verify timeout (s)")
    a = ap.parse_args(argv)
    try:
        s = rescore(a.run_dir, a.workers, a.timeout)
    except (NotARunFolder, ConfigError, DataError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from tasks.report import report
    print(report(s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
