"""A run folder: what it is for (RunSpec), its lock, and the checks that keep a rerun from
appending to a folder that holds a different run (tasks/identity.py)."""
from __future__ import annotations

import contextlib
import copy
import fcntl
import hashlib
import json
import os
import platform
from dataclasses import dataclass

from omegaconf import OmegaConf

from tasks import identity as ident
from tasks.prepare import ConfigError, engine_kwargs
from tasks.samples import CONFIG, META, SAMPLES, read_samples, write_atomic

@dataclass
class RunSpec:
    cfg: object        # the effective config (resolved, CPU clamps applied)
    dir: str
    meta: dict         # run.json: identity, model, engine kwargs, device, data, clamps


def file_sha256(path: str | None) -> str | None:
    if not path or not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run_spec(eff, run_dir: str, task, problems, device: str, notes: list[str]) -> RunSpec:
    data_file = task.data_path(eff.data_dir, eff.task.data_file) if eff.data_dir else None
    meta = {"identity": ident.identity(eff, device, task, problems),
            "model_id": eff.model.path or eff.model.name, "engine_kwargs": engine_kwargs(eff.engine),
            "device": device, "cpu_clamps": notes, "baseline_dir": None,
            "data_file": data_file, "data_sha256": file_sha256(data_file),
            "python": platform.python_version()}
    return RunSpec(eff, os.path.abspath(run_dir), meta)


def baseline_config(eff):
    """The Full-KV config a run is compared with: compression knobs do not touch Full KV, so
    a sweep over budgets and scoring switches shares one baseline."""
    base = copy.deepcopy(eff)
    base.engine.name, base.engine.budget, base.engine.compression = "fullkv", None, {}
    base.budget = base.engine.observation_window = None
    return base


def baseline_dir(eff, device: str) -> str:
    base = baseline_config(eff)
    return os.path.join(base.baseline.cache_dir, ident.run_name(base, device))


def baseline_spec(run: RunSpec, task, problems) -> RunSpec:
    """The Full-KV run this one is compared with (`baseline_config`)."""
    base, device = baseline_config(run.cfg), run.meta["device"]
    folder = baseline_dir(run.cfg, device)
    spec = run_spec(base, folder, task, problems, device, run.meta["cpu_clamps"])
    run.meta["baseline_dir"] = spec.dir
    return spec


@contextlib.contextmanager
def run_lock(run_dir: str):
    """Exclusive lock on a run folder while samples are generated: two jobs never append to
    one samples file (a budget sweep's jobs share one Full-KV baseline). A second job waits,
    then finds the work done. Scoring needs no lock: it never writes samples.jsonl."""
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


def check_folder(spec: RunSpec, new: dict) -> None:
    """Refuse to add samples to a folder whose samples came from another identity."""
    old_meta = ident.read_meta(spec.dir)
    has_samples = os.path.exists(os.path.join(spec.dir, SAMPLES))
    if old_meta is None or "identity" not in old_meta:
        if has_samples:
            raise ConfigError(ident.refusal(spec.dir, [
                "nothing can be checked: the folder predates recorded run identities"]))
        return
    changed = ident.differences(old_meta["identity"], new)
    if changed:
        raise ConfigError(ident.refusal(spec.dir, changed))


def check_rows(spec: RunSpec, problems, hashes: list[str]) -> None:
    """Every stored sample of a problem carries that problem's current prompt hash."""
    want = {p.id: h for p, h in zip(problems, hashes)}
    bad = [r["line"] for r in read_samples(os.path.join(spec.dir, SAMPLES)).rows
           if r["problem_id"] in want and r.get("prompt_hash") != want[r["problem_id"]]]
    if bad:
        lines = ", ".join(map(str, bad[:5])) + (" ..." if len(bad) > 5 else "")
        raise ConfigError(ident.refusal(spec.dir, [
            f"the prompts of {len(bad)} stored samples (samples.jsonl lines {lines})"]))


def check_baseline(run_dir: str, base_dir: str) -> None:
    """A cached baseline is compared only if it saw the same problems and prompts."""
    changed = ident.baseline_mismatch(ident.read_meta(run_dir), ident.read_meta(base_dir))
    if changed:
        raise ConfigError(ident.refusal(base_dir, changed, "a Full-KV baseline"))


def write_meta(spec: RunSpec) -> None:
    OmegaConf.save(spec.cfg, os.path.join(spec.dir, CONFIG))
    write_atomic(os.path.join(spec.dir, META), json.dumps(spec.meta, indent=2) + "\n")
