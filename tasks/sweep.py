"""Two-stage cluster sweep: every Full-KV baseline first, then the budget runs (SLURM afterok).

    python -m tasks.sweep hydra.launcher.partition=gpu task=amc23,aime24 budget=1024,2048,4096
    python -m tasks.sweep --dry-run ...                       # print both stages, submit nothing
    python -m tasks.sweep hydra/launcher=submitit_local ...   # here: stage 1, wait, stage 2

The arguments are run.py's multirun overrides; the jobs get the resources of
`configs/hydra/launcher/slurm.yaml` (the default; override any with `hydra.launcher.KEY=...`).
`python run.py -m hydra/launcher=slurm ...` runs the same sweep as one job array;
there the first job to need a shared baseline generates it and the others wait for it on a
GPU. Here stage 1 generates each baseline once (`baseline.only=true`), and stage 2 starts
only after all of stage 1 succeeded, so no budget job waits. The submitting process returns
at once. Results land where `run.py -m` puts them: `python -m tasks.tables results/multirun`.
"""
from __future__ import annotations

import copy
import itertools
import os
import sys

import submitit

from tasks.cli_parser import Parser

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCHER = ("hydra/launcher", "hydra.launcher")


def expand(overrides: list[str]) -> list[list[str]]:
    """Hydra's sweep syntax (a,b / range(...) / choice(...)) -> one override list per job."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    axes = []
    for o in OverridesParser.create().parse_overrides(overrides):
        key = o.get_key_element()
        if o.is_delete() and o.value() is None:  # ~key
            axes.append([key])
            continue
        values = list(o.sweep_string_iterator()) if o.is_sweep_override() else [o.get_value_element_as_str()]
        axes.append([f"{key}={v}" for v in values])
    return [list(job) for job in itertools.product(*axes)]


def compose(overrides: list[str]):
    """The job's full config, hydra node included: typos fail here, before any submission."""
    from hydra import compose as hydra_compose, initialize_config_dir
    from tasks.config import register_configs
    register_configs()
    with initialize_config_dir(config_dir=os.path.join(ROOT, "configs"), version_base=None):
        return hydra_compose("config", overrides=overrides, return_hydra_config=True)


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def job_device(cfg) -> str:
    """The device the job's engine will resolve: a SLURM job gets its GPUs (launcher's
    gpus_per_node), a local one this machine's."""
    from tasks.prepare import resolved_device
    if cfg.engine.device != "auto":
        return cfg.engine.device
    launcher = cfg.hydra.launcher
    if str(launcher.get("_target_", "")).endswith("SlurmLauncher"):
        return "cuda" if (launcher.get("gpus_per_node") or 0) > 0 else "cpu"
    return resolved_device("auto")


def job_folders(cfg, overrides: list[str] = ()) -> tuple[str, str | None]:
    """(the job's run folder name, its Full-KV baseline folder or None), as the job itself
    names them (tasks/plan.py: after the CPU clamps of its device)."""
    from omegaconf import open_dict
    from tasks.model_choice import stated_keys
    from tasks.plan import folder_names
    job = copy.deepcopy(cfg)
    with open_dict(job):
        del job["hydra"]
    job.data_dir = None  # not part of a folder's name; may not exist on the submitting host
    return folder_names(job, job_device(cfg), stated_keys(overrides))


def plan(overrides: list[str]) -> tuple[list[list[str]], list[list[str]]]:
    """(stage 1, stage 2): one baseline-only job per distinct Full-KV baseline, then one job
    per run folder (engine=fullkv ignores the budget: budget=1024,2048 is one run)."""
    from tasks.hub_revision import pinning_override
    stage1, stage2, bases_seen, dirs_seen = [], [], set(), set()
    for job in expand(overrides):
        cfg = compose(job)
        pin = pinning_override(cfg)  # a hub job reads the commit its folder is named after
        if pin:
            job = job + pin
            cfg = compose(job)
        folder, base = job_folders(cfg, job)
        job = [o for o in job if not _key(o).startswith(LAUNCHER)]  # the submitter's business
        if folder in dirs_seen:
            continue
        dirs_seen.add(folder)
        stage2.append(job)
        if base is not None and base not in bases_seen:
            bases_seen.add(base)
            stage1.append(job + ["baseline.only=true"])
    return stage1, stage2


def checked_plan(overrides: list[str]):
    """(stage 1, stage 2, the first job's config: its launcher settings); ValueError naming
    the fix for an override or a job config run.py would refuse."""
    from hydra.errors import HydraException
    from tasks.base import DataError
    from tasks.overrides import check_overrides
    from tasks.prepare import ConfigError
    error = check_overrides(overrides)
    if error:
        raise ValueError(error)
    try:
        stage1, stage2 = plan(overrides)
        return stage1, stage2, compose(expand(overrides)[0])
    except (ConfigError, DataError, HydraException) as e:
        raise ValueError(str(e).splitlines()[0]) from None


def executor_for(cfg, folder: str):
    """A submitit executor with the resources of `hydra.launcher` (the plugin's key names)."""
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
    from omegaconf import OmegaConf
    params = OmegaConf.to_container(cfg.hydra.launcher, resolve=True)
    cluster = "slurm" if params.pop("_target_").endswith("SlurmLauncher") else "local"
    params.pop("submitit_folder")
    init = {f"{cluster}_max_num_timeout": params.pop("max_num_timeout")} if cluster == "slurm" else {}
    executor = submitit.AutoExecutor(folder=folder, cluster=cluster, **init)
    common = set(OmegaConf.structured(BaseQueueConf).keys())
    executor.update_parameters(**{k if k in common else f"{cluster}_{k}": v for k, v in params.items()})
    return executor, cluster, params.get("additional_parameters") or {}


class RunApp(submitit.helpers.Checkpointable):
    """One job: the Hydra app in a subprocess. A job that reaches its time limit is requeued
    (up to hydra.launcher.max_num_timeout times) and resumes: finished samples are on disk."""

    def __init__(self, argv: list[str], cwd: str):
        self.argv, self.cwd = argv, cwd

    def __call__(self) -> str:
        return submitit.helpers.CommandFunction(self.argv, cwd=self.cwd, verbose=True)()


def submit(executor, jobs: list[list[str]], app: str) -> list:
    """Each job is `run.py -m` with one value per key: it names its folder after what ran,
    under hydra.sweep.dir, as a job of `run.py -m` does; relative paths mean what they mean
    to the submitter (results_dir, data_dir)."""
    with executor.batch():
        return [executor.submit(RunApp([sys.executable, app, "-m", *job], os.getcwd()))
                for job in jobs]


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog="python -m tasks.sweep", description=__doc__.splitlines()[0])
    ap.add_argument("overrides", nargs="*", help="run.py multirun overrides")
    ap.add_argument("--dry-run", action="store_true", help="print the two stages, submit nothing")
    ap.add_argument("--app", default=os.path.join(ROOT, "run.py"), help="the Hydra app each job runs")
    a = ap.parse_args(argv)
    overrides = a.overrides
    if not any(_key(o) == "hydra/launcher" for o in overrides):
        overrides = ["hydra/launcher=slurm", *overrides]
    try:
        stage1, stage2, cfg = checked_plan(overrides)
    except ValueError as e:  # what run.py would refuse: one line, nothing submitted
        print(f"error: {e}", file=sys.stderr)
        return 2
    sweep_dir = os.path.abspath(cfg.hydra.sweep.dir)
    print(f"stage 1: {len(stage1)} baseline job(s); stage 2: {len(stage2)} job(s); "
          f"results under {sweep_dir}")
    for name, jobs in (("stage 1", stage1), ("stage 2", stage2)):
        for job in jobs:
            print(f"  [{name}] run.py -m {' '.join(job)}")
    if a.dry_run:
        return 0
    executor, cluster, extra = executor_for(cfg, os.path.join(sweep_dir, ".submitit", "%j"))
    first = submit(executor, stage1, a.app) if stage1 else []
    if first and cluster == "slurm":
        ids = sorted({job.job_id.split("_")[0] for job in first})
        executor.update_parameters(slurm_additional_parameters={  # a failed baseline cancels
            **extra, "dependency": "afterok:" + ":".join(ids), "kill-on-invalid-dep": "yes"})
    elif first:  # no scheduler to hold stage 2 back: wait here
        failed = [job for job in first if job.exception() is not None]
        if failed:
            print(f"{len(failed)} baseline job(s) failed; logs: {failed[0].paths.stderr}", file=sys.stderr)
            return 1
    second = submit(executor, stage2, a.app)
    if cluster == "slurm":
        print(f"submitted: baselines {[j.job_id for j in first]}, then {[j.job_id for j in second]}")
        print(f"logs: {sweep_dir}/.submitit/; tables when done: python -m tasks.tables {sweep_dir}")
        return 0
    failed = [job for job in second if job.exception() is not None]
    for job in failed:
        print(f"failed: {job.paths.stderr}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
