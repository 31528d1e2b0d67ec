"""run.py's job: validate, generate what is missing, run (or reuse) the Full-KV baseline,
optionally re-time both in this job, score, summarise. Engine access goes through
`make_engine`, which tests replace."""
from __future__ import annotations

import gc
import json
import os
import sys

from tasks import identity as ident
from tasks.conditions import new_job_id
from tasks.generate import build_prompt_ids, generate_missing, timed_rerun
from tasks.prepare import (ConfigError, check_engine_kwargs, effective_config, engine_kwargs,
                           load_problems, resolved_device, task_from_config, validate)
from tasks.replicas import gpu_groups, run_replicas
from tasks.rundir import (RunSpec, baseline_spec, check_baseline, check_folder, check_rows,
                          run_lock, run_spec, write_meta)
from tasks.samples import RETIME, SAMPLES, SUMMARY, read_samples, write_atomic
from tasks.score import rescore

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


def free_engine(llm) -> None:
    for name in ("shutdown", "close"):
        if callable(getattr(llm, name, None)):
            getattr(llm, name)()
            break
    del llm
    gc.collect()
    if "torch" in sys.modules and sys.modules["torch"].cuda.is_available():
        sys.modules["torch"].cuda.empty_cache()


def generate_run(spec: RunSpec, task, problems, job: str, retime: list[int] | None = None):
    """Generate the missing samples of one run (and re-time `retime` problems) under its
    lock. -> (whether samples were generated, the re-timing segment or None)."""
    with run_lock(spec.dir):
        return _generate_run(spec, task, problems, job, retime)


def _generate_run(spec: RunSpec, task, problems, job: str, retime):
    eff, label = spec.cfg, spec.cfg.engine.name
    check_folder(spec, spec.meta["identity"])  # what is known before the model loads
    done = read_samples(os.path.join(spec.dir, SAMPLES)).keys()
    missing = sum(1 for p in problems for i in range(eff.sampling.n) if (p.id, i) not in done)
    if not missing and retime is None:
        return False, None
    model_id, kwargs = spec.meta["model_id"], spec.meta["engine_kwargs"]
    replicas = eff.engine.data_parallel_size
    llm = None
    if replicas > 1:
        tokenizer = make_tokenizer(model_id, kwargs)
    else:
        print(f"[{label}] loading {model_id} {kwargs}", flush=True)
        llm, sampling_cls = make_engine(model_id, kwargs)
        tokenizer = llm.tokenizer
    try:
        prompts = [build_prompt_ids(tokenizer, task, p, eff.model) for p in problems]
        context_note(label, eff.sampling.max_tokens, prompts, getattr(llm, "max_model_len", None))
        spec.meta["identity"] = ident.with_prompts(spec.meta["identity"], tokenizer, prompts)
        check_folder(spec, spec.meta["identity"])
        check_rows(spec, problems, [ident.prompt_hash(p) for p in prompts])
        write_meta(spec)
        if missing and llm is None:
            print(f"[{label}] {replicas} replicas loading {model_id} {kwargs}", flush=True)
            run_replicas(make_engine, model_id, kwargs, problems, prompts, eff.sampling,
                         eff.seed, spec.dir, job, ident.tokenizer_digest(tokenizer),
                         spec.meta["device"], replicas, eff.use_tqdm)
        elif missing:
            generate_missing(llm, task, problems, prompts, sampling_cls, eff.sampling, eff.seed,
                             spec.dir, job, use_tqdm=eff.use_tqdm)
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


def evaluate(cfg, run_dir: str | None = None, runs_root: str | None = None) -> dict:
    """One job. `run_dir` None: <runs_root>/<task>/<model>/<what ran> (tasks/identity.py);
    `runs_root` None: results_dir (a multirun job passes its sweep folder)."""
    validate(cfg)
    task = task_from_config(cfg)
    device = resolved_device(cfg.engine.device)
    eff, notes = effective_config(cfg, device == "cpu")
    problems = load_problems(eff, task)
    check_engine_kwargs(eff.model.path or eff.model.name, engine_kwargs(eff.engine))
    gpu_groups(eff.engine.data_parallel_size, eff.engine.tensor_parallel_size or 1, device)
    for note in notes:
        print(note, flush=True)
    run_dir = run_dir or eff.run_dir or os.path.join(runs_root or eff.results_dir,
                                                      ident.run_name(eff, device))
    run = run_spec(eff, run_dir, task, problems, device, notes)
    print(f"run folder: {run.dir}", flush=True)
    base = None
    if eff.engine.budget is not None and (eff.baseline.enabled or eff.baseline.only):
        base = baseline_spec(run, task, problems)
    job = new_job_id()
    sample = retime_sample(len(problems), eff.baseline.retime_problems) if eff.baseline.retime else None
    timings = {}
    if not eff.baseline.only:
        _, timings["run"] = generate_run(run, task, problems, job, sample)
    if base is not None:
        with run_lock(base.dir):  # a sweep's other jobs wait until it is generated and scored
            ran, timings["baseline"] = _generate_run(base, task, problems, job, sample)
            if eff.baseline.only:
                return rescore(base.dir)
            check_baseline(run.dir, base.dir)
            if ran or not os.path.exists(os.path.join(base.dir, SUMMARY)):
                rescore(base.dir)
            else:
                print(f"[fullkv] reusing cached baseline {base.dir}", flush=True)
    with run_lock(run.dir):
        if sample is not None:
            write_retime(run.dir, job, timings)
        return rescore(run.dir)


def write_retime(run_dir: str, job: str, timings: dict) -> None:
    rate = {k: (t["num_output_tokens"] / t["wall_time_s"] if t["wall_time_s"] > 0 else None)
            for k, t in timings.items()}
    speedup = rate["run"] / rate["baseline"] if rate["run"] and rate["baseline"] else None
    record = {"job": job, "problems": timings["run"]["problems"], "run": timings["run"],
              "baseline": timings["baseline"], "output_tokens_per_s": rate, "speedup": speedup}
    write_atomic(os.path.join(run_dir, RETIME), json.dumps(record, indent=2) + "\n")
