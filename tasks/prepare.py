"""From a composed config to what will run: validation (before any folder or model), the
data directory, CPU clamps, the bound task and its problems."""
from __future__ import annotations

import copy
import dataclasses
import os

from omegaconf import OmegaConf

from tasks.base import HFSource, get_task
from tasks.checkpoint import checkpoint_error
from tasks.config import unknown_keys

PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UNSET_CLAMPS = ("task.limit", "engine.max_model_len")  # null means "all", so it is clamped too


class ConfigError(ValueError):
    """A bad configuration, reported before any model is loaded or folder is created."""


def resolve_data_dir(value: str | None, root: str = PROJECT_ROOT) -> str | None:
    """An absolute data directory. A relative one is taken from the current directory if it
    exists there, else from the project root (so the README's ../shared/datasets works
    from any directory)."""
    if value is None:
        return None
    if os.path.isabs(value):
        if not os.path.isdir(value):
            raise ConfigError(f"data_dir={value} is not a directory")
        return value
    tried = [os.path.abspath(value), os.path.normpath(os.path.join(root, value))]
    for path in tried:
        if os.path.isdir(path):
            return path
    raise ConfigError(f"data_dir={value} is not a directory (looked in {tried[0]} and, from "
                      f"the project root, {tried[1]})")


def task_from_config(cfg):
    options = dict(OmegaConf.to_container(cfg.task.options, resolve=True))
    task = get_task(cfg.task.name)
    # Harness-wide switches reach the tasks that declare them, unless task.options sets them.
    for key, value in (("penalize_truncated", cfg.scoring.penalize_truncated),
                       ("thinking", cfg.model.thinking)):
        if hasattr(task.options, key):
            options.setdefault(key, value)
    return task.bind(options)


def hf_source(cfg, task) -> HFSource:
    over = {k: v for k, v in OmegaConf.to_container(cfg.task.hf, resolve=True).items()
            if v is not None}
    return HFSource(**{**task.hf.__dict__, **over})


def load_problems(cfg, task):
    return task.load(cfg.data_dir, cfg.task.limit, data_file=cfg.task.data_file,
                     hf=hf_source(cfg, task))


def check_scoring(scoring) -> None:
    """scoring.* values that cannot score, for a new run and for `python -m tasks.score`'s
    overrides alike. math-verify times out through signal.alarm, which counts whole seconds:
    the grader would silently turn 0 or 0.5 into 1 s and 2.5 into 2 s."""
    t = scoring.timeout_s
    if not (t >= 1 and float(t).is_integer()):
        raise ConfigError(f"scoring.timeout_s={t} must be a whole number of seconds, at least 1 "
                          "(math-verify's time limits are whole seconds)")
    if scoring.workers < 0:
        raise ConfigError(f"scoring.workers={scoring.workers} is out of range: 0 or more "
                          f"(0: one per CPU core)")


def validate(cfg) -> None:
    """Every check that needs neither the model nor a run folder."""
    bad = unknown_keys(cfg)
    if bad:
        raise ConfigError(f"unknown key(s) {', '.join(bad)} (see tasks/config.py)")
    check_scoring(cfg.scoring)
    e, s, b = cfg.engine, cfg.sampling, cfg.baseline
    bs = e.block_size
    if bs <= 0 or bs & (bs - 1):
        raise ConfigError(f"engine.block_size={bs} must be a power of two")
    if e.budget is not None and e.budget <= 0:
        raise ConfigError(f"budget={e.budget} must be a positive multiple of engine.block_size")
    if e.name.startswith("zipage") and e.budget is None:
        raise ConfigError(f"engine={e.name} needs a budget (use engine=fullkv for Full KV)")
    for key, ok, wanted in [
            ("sampling.n", s.n >= 1, "1 or more"),
            ("sampling.max_tokens", s.max_tokens >= 1, "1 or more"),
            ("sampling.temperature", s.temperature >= 0, "0 or more (0: greedy)"),
            ("sampling.top_p", 0 < s.top_p <= 1, "in (0, 1]"),
            ("task.limit", cfg.task.limit is None or cfg.task.limit >= 1,
             "1 or more (null: every problem)"),
            ("seed", cfg.seed >= 0, "0 or more"),
            ("baseline.retime_problems", b.retime_problems >= 1, "1 or more"),
            *((f"cpu.{key}", cfg.cpu[key] >= 1, "1 or more (a CPU run's clamp)")
              for key in ("max_tokens", "n", "limit", "budget", "max_model_len")),
            ("cpu.block_size", cfg.cpu.block_size >= 16
             and not cfg.cpu.block_size & (cfg.cpu.block_size - 1),
             "a power of two, 16 or more (a CPU run's clamp)")]:
        if not ok:
            raise ConfigError(f"{key}={OmegaConf.select(cfg, key)} is out of range: {wanted}")
    if (b.only or b.retime) and e.budget is None:
        flag = "baseline.only" if b.only else "baseline.retime"
        raise ConfigError(f"{flag}=true needs a budget run (the Full-KV baseline of a "
                          f"compressed run); engine=fullkv is its own baseline")
    if e.data_parallel_size < 1:
        raise ConfigError(f"engine.data_parallel_size={e.data_parallel_size} must be >= 1")
    if e.data_parallel_size > 1 and b.retime:
        raise ConfigError("baseline.retime=true times one engine against its baseline in "
                          "this process; run it with engine.data_parallel_size=1")
    if b.only and b.retime:
        raise ConfigError("baseline.retime=true times this run against its baseline; "
                          "baseline.only=true does not run it")
    if cfg.model.path is not None and checkpoint_error(cfg.model.path):
        raise ConfigError(checkpoint_error(cfg.model.path))
    resolve_data_dir(cfg.data_dir)
    try:
        task_from_config(cfg)
    except KeyError as err:
        raise ConfigError(str(err.args[0])) from None


def engine_kwargs(e) -> dict:
    d = OmegaConf.to_container(e, resolve=True)
    d.pop("name")
    d.pop("data_parallel_size")  # how many engines, not an engine option (tasks/replicas.py)
    extra = d.pop("extra")
    kw = {k: v for k, v in d.items() if v is not None and v != {}}
    kw["budget"] = d["budget"]  # None is meaningful: Full KV
    return {**kw, **extra}


def check_engine_kwargs(model_id: str, kwargs: dict, notes=()) -> dict | None:
    """The engine's own option check (unknown or invalid options), before any folder;
    returns the engine's resolved compression settings (None without zipage). A message
    naming an engine keyword names the config key that sets it, and the CPU clamps."""
    try:
        from zipage.config import EngineConfig
    except ImportError:
        return None
    try:
        engine = EngineConfig.from_kwargs(model_id, **kwargs)
    except (TypeError, ValueError) as err:
        text = str(err).replace("pass num_sink_tokens=0",  # the engine's keyword: our key
                                "set engine.compression.num_sink_tokens=0")
        clamps = "; ".join(n.split(": ", 1)[1].split(" (")[0] for n in notes
                           if n.startswith("CPU run: engine."))
        raise ConfigError(f"engine: {text}" + (f" (CPU run: {clamps}; cpu.enabled=false keeps "
                                               f"the configured values)" if clamps else "")) from None
    return dataclasses.asdict(engine.compression)


def resolved_device(device: str) -> str:
    if device != "auto":
        return device
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"


def effective_config(cfg, cpu: bool):
    """Resolved copy with the data directory and result folders made absolute and CPU
    clamps applied; returns (config, notes). The budget must be a multiple of the block
    size the run uses (on a CPU, the clamped one)."""
    eff = copy.deepcopy(cfg)
    OmegaConf.resolve(eff)
    eff.data_dir = resolve_data_dir(eff.data_dir)
    if eff.data_dir is None and eff.task.data_file is not None:  # a file named on its own
        eff.data_dir = os.getcwd()  # like data_dir, not part of the run's identity
    eff.results_dir = os.path.abspath(eff.results_dir)
    eff.baseline.cache_dir = os.path.abspath(eff.baseline.cache_dir)
    notes = []

    def clamp(key, limit, value):
        if value is not None and limit < value or value is None and key in UNSET_CLAMPS:
            OmegaConf.update(eff, key, limit)
            notes.append(f"CPU run: {key} {value} -> {limit} (cpu.enabled=false keeps it)")
    c, e, asked = eff.cpu, eff.engine, eff.engine.block_size
    if cpu and c.enabled:
        clamp("engine.block_size", c.block_size, e.block_size)
    if e.budget is not None and e.budget % e.block_size:
        why = (f" (this CPU run's: cpu.block_size clamps engine.block_size {asked} -> "
               f"{e.block_size}; cpu.enabled=false keeps {asked})" if notes else "")
        raise ConfigError(f"budget={e.budget} must be a positive multiple of "
                          f"engine.block_size={e.block_size}{why}")
    if cpu and c.enabled:
        clamp("sampling.max_tokens", c.max_tokens, eff.sampling.max_tokens)
        clamp("sampling.n", c.n, eff.sampling.n)
        clamp("task.limit", c.limit, eff.task.limit)
        clamp("engine.max_model_len", c.max_model_len, e.max_model_len)
        if e.budget is not None:
            b = max(c.block_size, min(e.budget, c.budget) // e.block_size * e.block_size)
            clamp("engine.budget", b, e.budget)
            eff.budget = e.budget
    return eff, notes
