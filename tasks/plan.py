"""The run plan: everything a run.py job (or a re-scoring) needs, derived once, here.

`make_plan(cfg)` validates the composed config and derives, in order: the device, the
effective config (resolved, absolute paths, CPU clamps), the model it runs and its label,
the engine's keyword arguments and resolved compression settings, the bound task and its
problems, the run folder, the sample and scoring identities, and the Full-KV baseline's own
plan. Generation (tasks/evaluate.py), scoring (tasks/score.py) and the sweep planner
(tasks/sweep.py) read the plan; none of them derives any of it again. `plan_for_folder`
rebuilds the plan of an existing run folder from its stored config, through the same steps.
"""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field

from omegaconf import OmegaConf, open_dict

from tasks import identity as ident
from tasks.base import Problem, Task
from tasks.hub_revision import pin_hub_revision
from tasks.model_choice import resolve_model
from tasks.prepare import (ConfigError, check_engine_kwargs, check_scoring, effective_config,
                           engine_kwargs, load_problems, resolved_device, task_from_config,
                           validate)
from tasks.rundir import file_sha256
from tasks.scoring_identity import scoring_identity

MAX_SEED = 2**32 - 1  # zipage.SamplingParams: seed + sample index must fit the sampler's 32 bits


@dataclass(frozen=True)
class RunPlan:
    cfg: object                  # the effective config (read-only DictConfig)
    clamps: tuple[str, ...]      # the CPU clamps applied, printed once and stored
    notes: tuple[str, ...]       # what was inferred: the model (tasks/model_choice.py), the
                                 # hub commit of the data (tasks/hub_revision.py)
    device: str                  # "cuda" | "cpu"
    model_id: str                # what the engine loads (model.path or a preset name)
    model_label: str             # the folder's and the tables' model name
    engine_kwargs: dict          # LLM(model_id, **engine_kwargs)
    compression: dict | None     # the engine's resolved compression settings (budget runs)
    run_dir: str                 # absolute
    task: Task | None = None     # bound with the run's options
    problems: tuple[Problem, ...] = ()
    data_file: str | None = None
    data_sha256: str | None = None
    identity: dict = field(default_factory=dict)   # sample identity known before the model
    scoring: dict = field(default_factory=dict)    # scoring identity (tasks/scoring_identity.py)
    baseline: "RunPlan | None" = None              # the Full-KV run this one is compared with


def _settled(cfg, device: str, stated, stored: dict | None):
    """(effective config, notes, model notes) before anything is loaded."""
    if stored is not None:  # a run folder's config: clamps and model choice already applied
        eff = copy.deepcopy(cfg)
        OmegaConf.resolve(eff)
        return eff, list(stored.get("cpu_clamps") or []), list(stored.get("notes") or [])
    eff, notes = effective_config(cfg, device == "cpu")
    return eff, notes, resolve_model(eff, stated)


def _engine(eff, notes) -> tuple[str, dict, dict | None]:
    model_id = eff.model.path or eff.model.name
    kwargs = engine_kwargs(eff.engine)
    compression = check_engine_kwargs(model_id, kwargs, notes)
    return model_id, kwargs, compression if eff.engine.budget is not None else None


def baseline_config(eff):
    """The Full-KV config a run is compared with: compression knobs do not touch Full KV, so
    a sweep over budgets and scoring switches shares one baseline."""
    base = copy.deepcopy(eff)
    OmegaConf.set_readonly(base, False)
    base.engine.name, base.engine.budget, base.engine.compression = "fullkv", None, {}
    base.budget = base.engine.observation_window = None
    return base


def baseline_folder(eff, device: str) -> str:
    """Where the Full-KV baseline of `eff` lives: named like any run, in baseline.cache_dir."""
    return os.path.join(eff.baseline.cache_dir, ident.run_name(baseline_config(eff), device))


def folder_names(cfg, device: str, stated=None) -> tuple[str, str | None]:
    """(the run folder's name under the runs root, the baseline's folder or None), without
    data or model: what tasks/sweep.py plans a sweep's stages with."""
    eff, notes, _ = _settled(cfg, device, stated, None)
    _, _, compression = _engine(eff, notes)
    name = ident.run_name(eff, device, compression)
    return name, baseline_folder(eff, device) if eff.engine.budget is not None else None


def make_plan(cfg, run_dir: str | None = None, runs_root: str | None = None, *,
              stated=None, stored: dict | None = None, device: str | None = None) -> RunPlan:
    """The plan of one job. `run_dir` None: <runs_root or results_dir>/<task>/<model>/<what
    ran>. `stated`: the keys the command line set (model.path runs infer what is not
    stated, tasks/model_choice.py). `stored`: the run.json of the folder `cfg` was read
    from (re-scoring): nothing is clamped or inferred again."""
    if stored is None:
        validate(cfg)
    device = device or resolved_device(cfg.engine.device)
    eff, notes, model_notes = _settled(cfg, device, stated, stored)
    model_id, kwargs, compression = _engine(eff, notes)  # a bad engine value before any data
    if stored is None:  # a run folder's config.yaml names its commit
        model_notes += pin_hub_revision(eff)
    task = task_from_config(eff)
    problems = tuple(load_problems(eff, task))
    if stored is None:
        _check_runnable(eff, device, len(problems))
        run_dir = run_dir or eff.run_dir or os.path.join(
            runs_root or eff.results_dir, ident.run_name(eff, device, compression))
    OmegaConf.set_readonly(eff, True)
    return _plan(eff, run_dir, (tuple(notes), tuple(model_notes)), device, task, problems,
                 model_id, kwargs, compression, stored)


def _plan(eff, run_dir, notes, device, task, problems, model_id, kwargs, compression,
          stored) -> RunPlan:
    data_file = task.data_path(eff.data_dir, eff.task.data_file) if eff.data_dir else None
    sha = file_sha256(data_file)
    base = None
    if eff.engine.budget is not None and (eff.baseline.enabled or eff.baseline.only):
        # A folder's record says where its baseline is (older configs name it relatively).
        folder = (stored or {}).get("baseline_dir") or baseline_folder(eff, device)
        bcfg = baseline_config(eff)
        OmegaConf.set_readonly(bcfg, True)
        base = _plan(bcfg, folder, notes, device, task, problems, model_id,
                     engine_kwargs(bcfg.engine), None, None)
    return RunPlan(
        cfg=eff, clamps=notes[0], notes=notes[1], device=device, model_id=model_id,
        model_label=eff.model.name, engine_kwargs=kwargs, compression=compression,
        run_dir=os.path.abspath(run_dir), task=task, problems=problems, data_file=data_file,
        data_sha256=sha, identity=ident.identity(eff, device, task, problems, compression),
        scoring=scoring_identity(task, problems, eff.scoring.timeout_s, sha), baseline=base)


def _check_runnable(eff, device: str, num_problems: int) -> None:
    """What the engine would reject only mid-run: the seeds' range, the GPUs a
    data-parallel run needs."""
    from tasks.replicas import gpu_groups
    last = eff.seed + num_problems * eff.sampling.n - 1
    if last > MAX_SEED:
        raise ConfigError(f"seed={eff.seed}: the run's samples use seeds up to {last} (seed + "
                          f"problem index x n + sample index); the sampler takes at most "
                          f"{MAX_SEED}")
    gpu_groups(eff.engine.data_parallel_size, eff.engine.tensor_parallel_size or 1, device)


def plan_for_folder(run_dir: str, stored_cfg, meta: dict, scoring: dict | None = None) -> RunPlan:
    """The plan of an existing run folder, from its config.yaml and run.json; `scoring`
    overrides scoring.* keys (`python -m tasks.score --timeout`)."""
    cfg = copy.deepcopy(stored_cfg)
    with open_dict(cfg):
        for key, value in (scoring or {}).items():
            if value is not None:
                cfg.scoring[key] = value
    check_scoring(cfg.scoring)
    return make_plan(cfg, run_dir, stored=meta, device=meta.get("device") or "cpu")
