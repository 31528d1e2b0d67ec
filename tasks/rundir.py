"""A run folder: its lock, its record (run.json, config.yaml) and the checks that keep a
rerun from appending to a folder that holds a different run (tasks/identity.py)."""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform

from omegaconf import OmegaConf

from tasks import identity as ident
from tasks.prepare import ConfigError
from tasks.samples import CONFIG, META, SAMPLES, read_samples, write_atomic


def file_sha256(path: str | None) -> str | None:
    if not path or not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run_record(plan, identity: dict, prompt_hashes: dict[str, str]) -> dict:
    """run.json: what generated the folder's samples (the plan, and what the model added:
    the prompt identity and each problem's prompt hash, the reference for its rows)."""
    return {"identity": identity, "model_id": plan.model_id, "model_label": plan.model_label,
            "engine_kwargs": plan.engine_kwargs, "compression": plan.compression,
            "device": plan.device, "cpu_clamps": list(plan.clamps), "notes": list(plan.notes),
            "baseline_dir": plan.baseline.run_dir if plan.baseline else None,
            "data_file": plan.data_file, "data_sha256": plan.data_sha256,
            "python": platform.python_version(), "prompt_hashes": prompt_hashes}


@contextlib.contextmanager
def run_lock(run_dir: str):
    """Exclusive lock on a run folder while samples are generated: two jobs never append to
    one samples file (a budget sweep's jobs share one Full-KV baseline). A second job waits,
    then finds the work done. Scoring needs no lock: it never writes samples.jsonl. A job
    that fails before writing anything (a model that does not load, Ctrl-C while loading)
    removes the folders it made, so no empty run folder is left behind."""
    lock_path = os.path.join(run_dir, ".lock")
    while True:
        made = _first_missing(run_dir)
        os.makedirs(run_dir, exist_ok=True)
        try:
            f = open(lock_path, "a")
        except FileNotFoundError:  # a failed job removed the folder just now
            continue
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for another job generating {run_dir}", flush=True)
            fcntl.flock(f, fcntl.LOCK_EX)
        if _same_file(f, lock_path):
            break
        f.close()  # the job we waited for failed and removed the folder: make it again
    try:
        yield
    except BaseException:
        if made and os.listdir(run_dir) == [".lock"]:
            _remove_made(run_dir, made)
        raise
    finally:
        fcntl.flock(f, fcntl.LOCK_UN)
        f.close()


def _first_missing(path: str) -> str | None:
    """The outermost folder of `path` that does not exist yet (None: it all exists)."""
    path, top = os.path.abspath(path), None
    while not os.path.exists(path):
        path, top = os.path.dirname(path), path
    return top


def _same_file(f, path: str) -> bool:
    try:
        return os.fstat(f.fileno()).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False


def _remove_made(run_dir: str, top: str) -> None:
    """Remove the run folder's lock, then each empty folder from it up to `top`."""
    os.remove(os.path.join(run_dir, ".lock"))
    path, top = os.path.abspath(run_dir), os.path.abspath(top)
    while True:
        try:
            os.rmdir(path)
        except OSError:  # not empty: another run's folder lives there now
            return
        if path == top:
            return
        path = os.path.dirname(path)


def check_folder(run_dir: str, new: dict, parts=tuple(ident.WHAT), cfg=None,
                 device: str | None = None) -> None:
    """Refuse to add samples to (or score) a folder whose samples came from another
    identity (the `parts` of it both know); with the new run's effective `cfg` and `device`,
    changed settings are named key by key from the folder's config.yaml and run.json."""
    old_meta = ident.read_meta(run_dir)
    has_samples = os.path.exists(os.path.join(run_dir, SAMPLES))
    if old_meta is None or "identity" not in old_meta:
        if has_samples:
            raise ConfigError(ident.refusal(run_dir, [
                "nothing can be checked: the folder predates recorded run identities"]))
        return
    old = {k: v for k, v in old_meta["identity"].items() if k in parts}
    changed = ident.differences(old, new)
    config = os.path.join(run_dir, CONFIG)
    if changed and cfg is not None and os.path.exists(config) and changed[0].startswith(
            ident.WHAT["settings"]):
        keys = ident.changed_keys(OmegaConf.load(config), old_meta.get("device"), cfg, device)
        changed[0] = f"{ident.WHAT['settings']} ({keys})" if keys else changed[0]
    if changed:
        raise ConfigError(ident.refusal(run_dir, changed))


def check_rows(run_dir: str, problems, hashes: list[str]) -> None:
    """Every stored sample of a problem carries that problem's current prompt hash."""
    want = {p.id: h for p, h in zip(problems, hashes)}
    bad = [r["line"] for r in read_samples(os.path.join(run_dir, SAMPLES)).rows
           if r["problem_id"] in want and r.get("prompt_hash") != want[r["problem_id"]]]
    if bad:
        lines = ", ".join(map(str, bad[:5])) + (" ..." if len(bad) > 5 else "")
        raise ConfigError(ident.refusal(run_dir, [
            f"the prompts of {len(bad)} stored samples (samples.jsonl lines {lines})"]))


def check_baseline(run_dir: str, base_dir: str) -> None:
    """A cached baseline is compared only if it saw the same problems and prompts."""
    changed = ident.baseline_mismatch(ident.read_meta(run_dir), ident.read_meta(base_dir))
    if changed:
        raise ConfigError(ident.refusal(base_dir, changed, "a Full-KV baseline"))


def write_config(plan) -> None:
    """config.yaml: the effective config the folder was last generated or scored with."""
    path = os.path.join(plan.run_dir, CONFIG)
    write_atomic(path, OmegaConf.to_yaml(plan.cfg))


def write_meta(plan, identity: dict, prompt_hashes: dict[str, str]) -> None:
    write_config(plan)
    write_atomic(os.path.join(plan.run_dir, META),
                 json.dumps(run_record(plan, identity, prompt_hashes), indent=2) + "\n")


def _engine_settings(meta: dict) -> dict:
    """A run.json's engine settings: kwargs (compression aside) and resolved compression."""
    kwargs = dict(meta.get("engine_kwargs") or {})
    raw = kwargs.pop("compression", None) or {}
    return {"engine": kwargs, "compression": meta.get("compression") or raw}


def sibling_note(plan) -> str | None:
    """When the folder this command maps to is new but a folder of the same name up to the
    hash holds an earlier run of it (same task, model, engine, budget, n, len, limit,
    seed), name it and the engine settings that differ (from its run.json)."""
    parent, name = os.path.split(plan.run_dir)
    if os.path.exists(plan.run_dir) or not os.path.isdir(parent) or "-" not in name:
        return None
    stem = name.rsplit("-", 1)[0]
    found = [os.path.join(parent, d) for d in os.listdir(parent)
             if d != name and d.rsplit("-", 1)[0] == stem
             and ident.read_meta(os.path.join(parent, d))]
    if not found:
        return None
    folder = max(found, key=os.path.getmtime)
    old = _engine_settings(ident.read_meta(folder))
    new = {"engine": {k: v for k, v in plan.engine_kwargs.items() if k != "compression"},
           "compression": plan.compression or plan.engine_kwargs.get("compression") or {}}
    parts = []
    for group in ("compression", "engine"):
        keys = [k for k in sorted(set(old[group]) | set(new[group]))
                if old[group].get(k) != new[group].get(k)]
        if keys:
            parts.append(f"{group} " + ", ".join(f"{k}={old[group].get(k)}" for k in keys)
                         + f" (now {', '.join(str(new[group].get(k)) for k in keys)})")
    what = (" with " + "; ".join(parts) if parts else
            " (its recorded engine settings are the same: the folder's identity now also "
            "counts the engine's resolved compression settings)")
    return f"note: {folder} holds this command's earlier run{what}; this run starts a new folder"
