"""run.py's job: validate, generate what is missing, run (or reuse) the Full-KV baseline,
score, summarise. Engine access goes through `make_engine`, which tests replace."""
from __future__ import annotations

import contextlib
import copy
import fcntl
import gc
import json
import os
import platform
import sys

from omegaconf import OmegaConf

from tasks.base import DataError
from tasks.config import config_hash
from tasks.generate import build_prompt_ids, generate_missing, read_rows
from tasks.score import CONFIG, META, SAMPLES, STATS, SUMMARY, load_problems, rescore, task_from_config


class ConfigError(ValueError):
    """A bad configuration, reported before any model is loaded."""


def make_engine(model_id: str, kwargs: dict):
    """-> (llm, SamplingParams class). The only place that imports the engine."""
    from zipage import LLM, SamplingParams
    return LLM(model_id, **kwargs), SamplingParams


def validate(cfg) -> None:
    e, s = cfg.engine, cfg.sampling
    bs = e.block_size
    if bs <= 0 or bs & (bs - 1):
        raise ConfigError(f"engine.block_size={bs} must be a power of two")
    if e.budget is not None and (e.budget <= 0 or e.budget % bs):
        raise ConfigError(f"budget={e.budget} must be a positive multiple of engine.block_size={bs}")
    if e.name.startswith("zipage") and e.budget is None:
        raise ConfigError(f"engine={e.name} needs a budget (use engine=fullkv for Full KV)")
    for key, ok in [("sampling.n", s.n >= 1), ("sampling.max_tokens", s.max_tokens >= 1),
                    ("sampling.temperature", s.temperature >= 0), ("sampling.top_p", 0 < s.top_p <= 1),
                    ("task.limit", cfg.task.limit is None or cfg.task.limit >= 1), ("seed", cfg.seed >= 0)]:
        if not ok:
            raise ConfigError(f"{key}={OmegaConf.select(cfg, key)} is out of range")
    if cfg.data_dir is not None and not os.path.isdir(cfg.data_dir):
        raise ConfigError(f"data_dir={cfg.data_dir} is not a directory")
    try:
        task_from_config(cfg)
    except KeyError as err:
        raise ConfigError(str(err.args[0])) from None


def engine_kwargs(e) -> dict:
    d = OmegaConf.to_container(e, resolve=True)
    d.pop("name")
    extra = d.pop("extra")
    kw = {k: v for k, v in d.items() if v is not None and v != {}}
    kw["budget"] = d["budget"]  # None is meaningful: Full KV
    return {**kw, **extra}


def on_cpu(device: str) -> bool:
    if device != "auto":
        return device == "cpu"
    import torch
    return not torch.cuda.is_available()


UNSET_CLAMPS = ("task.limit", "engine.max_model_len")  # null means "all", so it is clamped too


def effective_config(cfg, cpu: bool):
    """Resolved copy with CPU clamps applied; returns (config, notes)."""
    eff = copy.deepcopy(cfg)
    OmegaConf.resolve(eff)
    if eff.data_dir:
        eff.data_dir = os.path.abspath(eff.data_dir)
    notes = []
    if cpu and eff.cpu.enabled:
        def clamp(key, limit, value):
            if value is not None and limit < value or value is None and key in UNSET_CLAMPS:
                OmegaConf.update(eff, key, limit)
                notes.append(f"CPU run: {key} {value} -> {limit} (cpu.enabled=false keeps it)")
        c = eff.cpu
        clamp("engine.block_size", c.block_size, eff.engine.block_size)
        clamp("sampling.max_tokens", c.max_tokens, eff.sampling.max_tokens)
        clamp("sampling.n", c.n, eff.sampling.n)
        clamp("task.limit", c.limit, eff.task.limit)
        clamp("engine.max_model_len", c.max_model_len, eff.engine.max_model_len)
        if eff.engine.budget is not None:
            b = max(c.block_size, min(eff.engine.budget, c.budget) // eff.engine.block_size
                    * eff.engine.block_size)
            clamp("engine.budget", b, eff.engine.budget)
            eff.budget = eff.engine.budget
    return eff, notes


def free_engine(llm) -> None:
    for name in ("shutdown", "close"):
        if callable(getattr(llm, name, None)):
            getattr(llm, name)()
            break
    del llm
    gc.collect()
    if "torch" in sys.modules and sys.modules["torch"].cuda.is_available():
        sys.modules["torch"].cuda.empty_cache()


def prepare_dir(run_dir: str, eff, meta: dict) -> None:
    """Create or reopen a run folder; refuse one that holds a different run."""
    os.makedirs(run_dir, exist_ok=True)
    path = os.path.join(run_dir, META)
    if os.path.exists(path):
        with open(path) as f:
            old = json.load(f)
        if old.get("key") != meta["key"]:
            raise ConfigError(f"{run_dir} holds a different run (key {old.get('key')} != "
                              f"{meta['key']}); pick another hydra.run.dir")
    OmegaConf.save(eff, os.path.join(run_dir, CONFIG))
    with open(path, "w") as f:
        json.dump(meta, f, indent=2)


@contextlib.contextmanager
def run_lock(run_dir: str):
    """Exclusive lock on a run folder: two jobs never append to one samples file (a budget
    sweep's jobs share one Full-KV baseline). A second job waits, then finds it done."""
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, ".lock"), "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for another job generating {run_dir}", flush=True)
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def generate_run(eff, run_dir: str, meta: dict, problems, task) -> bool:
    """Generate the missing samples of one run; True if the engine ran."""
    with run_lock(run_dir):
        return _generate_run(eff, run_dir, meta, problems, task)


def _generate_run(eff, run_dir: str, meta: dict, problems, task) -> bool:
    prepare_dir(run_dir, eff, meta)
    path = os.path.join(run_dir, SAMPLES)
    done = {(r["problem_id"], r["sample_index"]) for r in read_rows(path)}
    if len(done) >= len(problems) * eff.sampling.n:
        return False
    print(f"[{eff.engine.name}] loading {meta['model_id']} {meta['engine_kwargs']}", flush=True)
    llm, sampling_cls = make_engine(meta["model_id"], meta["engine_kwargs"])
    try:
        prompts = [build_prompt_ids(llm.tokenizer, task, p, eff.model) for p in problems]
        stats = generate_missing(llm, task, problems, prompts, sampling_cls, eff.sampling,
                                 eff.seed, path, use_tqdm=eff.use_tqdm)
    finally:
        free_engine(llm)
    if stats is not None:
        with open(os.path.join(run_dir, STATS), "a") as f:
            f.write(json.dumps(stats) + "\n")
    return True


def evaluate(cfg, run_dir: str) -> dict:
    validate(cfg)
    task = task_from_config(cfg)
    if cfg.data_dir is None and cfg.task.hf.revision is None:  # fail before loading torch
        raise DataError(f"task {cfg.task.name}: pass data_dir=... (or ZIPAGE_DATA_DIR), or pin "
                        f"task.hf.revision to load the Hugging Face copy")
    eff, notes = effective_config(cfg, on_cpu(cfg.engine.device))
    for note in notes:
        print(note, flush=True)
    problems = load_problems(eff, task)
    model_id = eff.model.path or eff.model.name
    meta = {"key": config_hash(eff.engine, eff.sampling, eff.model, eff.task, eff.seed),
            "model_id": model_id, "engine_kwargs": engine_kwargs(eff.engine),
            "device": "cpu" if on_cpu(eff.engine.device) else eff.engine.device,
            "cpu_clamps": notes, "python": platform.python_version(), "baseline_dir": None}
    base = None
    if eff.baseline.only and eff.engine.budget is None:
        raise ConfigError("baseline.only=true needs a budget run's settings (the Full-KV "
                          "baseline of a compressed run); with engine=fullkv just run it")
    if eff.engine.budget is not None and (eff.baseline.enabled or eff.baseline.only):
        base = copy.deepcopy(eff)
        # Compression knobs do not touch Full KV: a sweep over them shares one baseline.
        base.engine.name, base.engine.budget, base.engine.compression, base.budget = \
            "fullkv", None, {}, None
        base.engine.observation_window = None
        bkey = config_hash(base.engine, base.sampling, base.model, base.task, base.seed)
        meta["baseline_dir"] = os.path.abspath(os.path.join(
            eff.baseline.cache_dir, eff.task.name, eff.model.name, f"fullkv-{bkey}"))
    if not eff.baseline.only:
        generate_run(eff, run_dir, meta, problems, task)
    if base is not None:
        bmeta = {**meta, "key": bkey, "engine_kwargs": engine_kwargs(base.engine), "baseline_dir": None}
        bdir = meta["baseline_dir"]
        with run_lock(bdir):  # scoring rewrites samples.jsonl: under the lock too
            ran = _generate_run(base, bdir, bmeta, problems, task)
            summary = None
            if ran or not os.path.exists(os.path.join(bdir, SUMMARY)):
                summary = rescore(bdir)
            else:
                print(f"[fullkv] reusing cached baseline {bdir}", flush=True)
            if eff.baseline.only:
                return summary or rescore(bdir)
    with run_lock(run_dir):
        return rescore(run_dir)
