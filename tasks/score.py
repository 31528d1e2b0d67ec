"""Score a run folder from its samples file: `python -m tasks.score RUN_DIR`.

Works on finished and partial runs alike; rewrites samples.jsonl with verdicts and writes
summary.json (including the `baseline` block when the run's Full-KV baseline has a summary).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from omegaconf import OmegaConf

from tasks.base import HFSource, get_task
from tasks.generate import read_rows, write_rows
from tasks.summary import compare, summarize

SAMPLES, SUMMARY, STATS, META, CONFIG = ("samples.jsonl", "summary.json", "generation_stats.jsonl",
                                         "run.json", "config.yaml")


def task_from_config(cfg):
    options = dict(OmegaConf.to_container(cfg.task.options, resolve=True))
    options.setdefault("penalize_truncated", cfg.scoring.penalize_truncated)
    options.setdefault("thinking", cfg.model.thinking)  # reasoning-model answer extraction
    return get_task(cfg.task.name, options)


def load_problems(cfg, task):
    hf = HFSource(**OmegaConf.to_container(cfg.task.hf, resolve=True))
    return task.load(cfg.data_dir, cfg.task.limit, data_file=cfg.task.data_file, hf=hf)


def read_jsonl(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def rescore(run_dir: str, workers: int | None = None, timeout: float | None = None) -> dict:
    cfg = OmegaConf.load(os.path.join(run_dir, CONFIG))
    with open(os.path.join(run_dir, META)) as f:
        meta = json.load(f)
    task = task_from_config(cfg)
    problems = {p.id: p for p in load_problems(cfg, task)}
    rows = read_rows(os.path.join(run_dir, SAMPLES))
    unknown = [r for r in rows if r["problem_id"] not in problems]
    if unknown:
        print(f"warning: {len(unknown)} samples name problems not in the data; ignored", file=sys.stderr)
        rows = [r for r in rows if r["problem_id"] in problems]
    workers = workers or cfg.scoring.workers or os.cpu_count() or 1
    verdicts = task.score(rows, problems, workers=workers,
                          timeout=timeout or cfg.scoring.timeout_s) if rows else []
    for r, v in zip(rows, verdicts):
        r.update(v)
    order = {pid: i for i, pid in enumerate(problems)}  # data order, then sample index
    rows.sort(key=lambda r: (order[r["problem_id"]], r["sample_index"]))
    write_rows(os.path.join(run_dir, SAMPLES), rows)

    s = {"task": cfg.task.name, "model": cfg.model.name, "engine": cfg.engine.name,
         "budget": cfg.engine.budget, "block_size": cfg.engine.block_size,
         "n": cfg.sampling.n, "max_tokens": cfg.sampling.max_tokens,
         "temperature": cfg.sampling.temperature, "seed": cfg.seed, "device": meta.get("device"),
         "run_dir": os.path.abspath(run_dir), "cpu_clamps": meta.get("cpu_clamps", [])}
    s.update(summarize(rows, len(problems), cfg.sampling.n, read_jsonl(os.path.join(run_dir, STATS))))
    s.update(task.summary_extras(rows, verdicts, problems))
    s["baseline"] = baseline_block(s, meta.get("baseline_dir"))
    with open(os.path.join(run_dir, SUMMARY), "w") as f:
        json.dump(s, f, indent=2)
    return s


def baseline_block(s: dict, baseline_dir: str | None) -> dict:
    if s["budget"] is None:  # a Full-KV run is its own baseline
        return {**compare(s, s), "run_dir": s["run_dir"]}
    path = os.path.join(baseline_dir or "", SUMMARY)
    if baseline_dir and os.path.exists(path):
        with open(path) as f:
            return {**compare(s, json.load(f)), "run_dir": baseline_dir}
    return {**compare(s, {}), "run_dir": baseline_dir, "status": "not computed"}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--timeout", type=float, default=None, help="per-sample math-verify timeout (s)")
    a = ap.parse_args(argv)
    s = rescore(a.run_dir, a.workers, a.timeout)
    from tasks.report import report
    print(report(s))


if __name__ == "__main__":
    main()
