"""run.py's job, by its plan (tasks/plan.py): generate what is missing, run (or reuse) the
Full-KV baseline, optionally re-time both in this job, score, summarise. Everything the
job needs to know (folder, identity, engine options, baseline) comes from the plan; engine
access goes through `make_engine`, which tests replace."""
from __future__ import annotations

import json
import os
import sys

from tasks import identity as ident
from tasks.conditions import new_job_id
from tasks.engines import free_engine
from tasks.generate import build_prompt_ids, generate_missing, timed_rerun
from tasks.plan import RunPlan, make_plan
from tasks.prepare import ConfigError
from tasks.replicas import run_replicas
from tasks.rundir import (check_baseline, check_folder, check_rows, run_lock, sibling_note,
                          write_meta)
from tasks.samples import RETIME, SAMPLES, read_samples, write_atomic
from tasks.score_plan import score_baseline, score_run

__all__ = ["ConfigError", "evaluate", "make_engine"]


def make_engine(model_id: str, kwargs: dict):
    """-> (llm, SamplingParams class). The only place that imports the engine."""
    from zipage import LLM, SamplingParams
    return LLM(model_id, **kwargs), SamplingParams


def make_tokenizer(model_id: str, kwargs: dict):
    """The engine's tokenizer without its model: a data-parallel run builds the prompts
    once, here, and its replicas load the engines."""
    from zipage.llm import load_engine_tokenizer
    return load_engine_tokenizer(model_id, **kwargs)


def context_note(label: str, max_tokens: int, prompts, max_model_len: int | None) -> None:
    """Say so when the model's context, not sampling.max_tokens, ends the samples."""
    if max_model_len is None or not prompts:
        return
    room = max_model_len - min(len(p) for p in prompts)
    if max_tokens > room:
        print(f"[{label}] note: sampling.max_tokens={max_tokens} exceeds the model's context "
              f"({max_model_len} tokens, prompt included): samples end at {room} new tokens "
              f"or fewer", flush=True)


def generate_run(plan: RunPlan, job: str, retime: list[int] | None = None):
    """Generate the missing samples of one run (and re-time `retime` problems); the caller
    holds its lock. -> (whether samples were generated, the re-timing segment or None)."""
    eff, label, problems = plan.cfg, plan.cfg.engine.name, plan.problems
    check_folder(plan.run_dir, plan.identity, cfg=plan.cfg,  # known before the model loads
                 device=plan.device)
    done = read_samples(os.path.join(plan.run_dir, SAMPLES)).keys()
    missing = sum(1 for p in problems for i in range(eff.sampling.n) if (p.id, i) not in done)
    if not missing and retime is None:
        return False, None
    model_id, kwargs = plan.model_id, plan.engine_kwargs
    replicas = eff.engine.data_parallel_size
    llm = None
    if replicas > 1:
        tokenizer = make_tokenizer(model_id, kwargs)
    else:
        print(f"[{label}] loading {model_id} {kwargs}", flush=True)
        llm, sampling_cls = make_engine(model_id, kwargs)
        tokenizer = llm.tokenizer
    try:
        prompts = [build_prompt_ids(tokenizer, plan.task, p, eff.model) for p in problems]
        context_note(label, eff.sampling.max_tokens, prompts, getattr(llm, "max_model_len", None))
        identity = ident.with_prompts(plan.identity, tokenizer, prompts)
        check_folder(plan.run_dir, identity)
        hashes = [ident.prompt_hash(p) for p in prompts]
        check_rows(plan.run_dir, problems, hashes)
        write_meta(plan, identity, {p.id: h for p, h in zip(problems, hashes)})
        if missing and llm is None:
            print(f"[{label}] {replicas} replicas loading {model_id} {kwargs}", flush=True)
            run_replicas(make_engine, model_id, kwargs, problems, prompts, eff.sampling,
                         eff.seed, plan.run_dir, job, ident.tokenizer_digest(tokenizer),
                         plan.device, replicas, eff.use_tqdm)
        elif missing:
            generate_missing(llm, plan.task, problems, prompts, sampling_cls, eff.sampling,
                             eff.seed, plan.run_dir, job, use_tqdm=eff.use_tqdm)
        timing = None
        if retime is not None:
            print(f"[{label}] re-timing {len(retime)} problems", flush=True)
            timing = timed_rerun(llm, problems, prompts, sampling_cls, eff.sampling, eff.seed,
                                 retime, job)
    finally:
        if llm is not None:
            free_engine(llm)
    return bool(missing), timing


def retime_sample(num_problems: int, k: int) -> list[int]:
    """`k` problem indices spread evenly over the run."""
    k = min(k, num_problems)
    return sorted({round(i * num_problems / k) for i in range(k)})


def unused_budget_note(cfg, stated) -> tuple[str, ...]:
    """`budget=` given to an engine that keeps every token: say so rather than drop it."""
    if "budget" not in set(stated or ()) or cfg.engine.budget is not None or cfg.budget is None:
        return ()
    return (f"note: budget={cfg.budget} does not apply to engine={cfg.engine.name}, which keeps "
            f"every token (one run folder serves every budget)",)


def greedy_samples_note(cfg) -> tuple[str, ...]:
    """n > 1 at temperature 0: every sample of a problem takes the same greedy path."""
    n = cfg.sampling.n
    if cfg.sampling.temperature > 0 or n <= 1:
        return ()
    return (f"note: sampling.n={n} at temperature 0 (greedy): a problem's {n} samples take the "
            f"same path (up to rounding), so pass@1 is n=1's and maj@k adds nothing; "
            f"sampling.n=1 costs 1/{n} of the tokens",)


def evaluate(cfg, run_dir: str | None = None, runs_root: str | None = None,
             stated=None) -> dict:
    """One job, by its plan (tasks/plan.py). `run_dir` None: <runs_root>/<task>/<model>/<what
    ran>; `runs_root` None: results_dir (a multirun job passes its sweep folder); `stated`:
    the keys the command line set."""
    plan = make_plan(cfg, run_dir, runs_root, stated=stated)
    for note in (plan.clamps + plan.notes + unused_budget_note(plan.cfg, stated)
                 + greedy_samples_note(plan.cfg)):
        print(note, file=sys.stderr if note.startswith("warning") else sys.stdout, flush=True)
    sibling = sibling_note(plan)
    if sibling:
        print(sibling, flush=True)
    print(f"run folder: {plan.run_dir}", flush=True)
    b, base = plan.cfg.baseline, plan.baseline
    job = new_job_id()
    sample = retime_sample(len(plan.problems), b.retime_problems) if b.retime else None
    timings = {}
    if not b.only:
        with run_lock(plan.run_dir):
            _, timings["run"] = generate_run(plan, job, sample)
    if base is not None:
        with run_lock(base.run_dir):  # a sweep's other jobs wait until it is generated and scored
            ran, timings["baseline"] = generate_run(base, job, sample)
            if b.only:
                return score_run(base)
            check_baseline(plan.run_dir, base.run_dir)
            score_baseline(base, ran)
    with run_lock(plan.run_dir):
        if sample is not None:
            write_retime(plan.run_dir, job, timings)
        return score_run(plan)


def write_retime(run_dir: str, job: str, timings: dict) -> None:
    rate = {k: (t["num_output_tokens"] / t["wall_time_s"] if t["wall_time_s"] > 0 else None)
            for k, t in timings.items()}
    speedup = rate["run"] / rate["baseline"] if rate["run"] and rate["baseline"] else None
    record = {"job": job, "problems": timings["run"]["problems"], "run": timings["run"],
              "baseline": timings["baseline"], "output_tokens_per_s": rate, "speedup": speedup}
    write_atomic(os.path.join(run_dir, RETIME), json.dumps(record, indent=2) + "\n")
