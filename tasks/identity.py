"""What determines a run's samples, and how a rerun proves it continues the same run.

A run's identity has five parts, stored in run.json; a rerun that would append to the
folder must match every part it can compute, or it is refused (nothing is mixed):

    settings      engine, sampling, model, task config and seed after CPU clamps, minus the
                  engine settings that only schedule work (SCHEDULING_ONLY); every other
                  engine setting counts, so a new one (kv_cache_dtype) joins by itself. A
                  run with a budget also counts the engine's resolved compression settings
                  (library defaults included), so a changed default is a new folder
    task_version  the task's `version` (bumped when its prompt or row handling changes)
    problems      the chat messages of every problem used (data rows and instruction)
    prompts       the prompt token ids (chat template, system prompt, tokenizer)
    tokenizer     the tokenizer's vocabulary and chat template (it also decodes the outputs)

The first three are known before the model loads; the last two once the engine is up, so
they are checked whenever samples are generated. Every sample row also carries the hash of
its own prompt (`prompt_hash`).
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from omegaconf import OmegaConf

# Engine settings that only decide how work is scheduled or how memory is sized: changing
# one resumes the same run. (Batched float arithmetic may still differ in the last bits.)
SCHEDULING_ONLY = ("gpu_memory_utilization", "max_num_seqs", "max_num_batched_tokens",
                   "kv_cache_tokens", "enforce_eager", "async_scheduling", "device",
                   "data_parallel_size")
WHAT = {"settings": "the engine/sampling/model/task settings",
        "task_version": "the task version (its prompt or row handling changed in the code)",
        "problems": "the problems' text (the data file, or the instruction)",
        "prompts": "the prompt token ids (chat template, system prompt or tokenizer)",
        "tokenizer": "the tokenizer (vocabulary or chat template)"}


def digest(obj: Any, n: int = 16) -> str:
    plain = OmegaConf.to_container(obj, resolve=True) if OmegaConf.is_config(obj) else obj
    return hashlib.sha256(json.dumps(plain, sort_keys=True, default=str).encode()).hexdigest()[:n]


def settings(eff, device: str, compression: dict | None = None) -> dict:
    """The config values that change the samples (post-clamp `eff`, resolved device) and,
    for a budget run, the engine's resolved `compression` (Full KV: unchanged keys)."""
    engine = OmegaConf.to_container(eff.engine, resolve=True)
    extra = engine.pop("extra")
    engine = {k: v for k, v in {**engine, **extra}.items() if k not in SCHEDULING_ONLY}
    if engine.get("kv_cache_dtype", "auto") in (None, "auto"):  # the default: keys made
        engine.pop("kv_cache_dtype", None)  # before the option existed stay the same
    rotation = engine.pop("fp8_key_rotation", None)
    if engine.get("kv_cache_dtype") == "fp8":  # resolved, so fp8 runs from before the
        engine["fp8_key_rotation"] = rotation is not False  # rotation are other folders
    elif rotation is not None:
        engine["fp8_key_rotation"] = rotation
    decode = engine.pop("fp8_decode", None)  # the default's keys stay those of before
    if decode not in (None, "f16"):  # e4m3 MMAs round P like bf16: other samples
        engine["fp8_decode"] = decode
    task = OmegaConf.to_container(eff.task, resolve=True)
    if task.get("hf", {}).get("answer_rule", 0) is None:  # unset: folders named before the
        del task["hf"]["answer_rule"]  # key existed stay the same
    out = {"engine": engine, "sampling": OmegaConf.to_container(eff.sampling, resolve=True),
           "model": OmegaConf.to_container(eff.model, resolve=True),
           "task": task, "seed": eff.seed,
           "device": device}
    if eff.engine.budget is not None and compression is not None:
        out["resolved_compression"] = compression
    return out


def kv_cache_dtype(eff) -> str:
    """The run's KV storage ("auto" or "fp8"), from engine.kv_cache_dtype or engine.extra."""
    e = eff.engine
    value = e.get("kv_cache_dtype") or (e.get("extra") or {}).get("kv_cache_dtype")
    return value or "auto"


def run_name(eff, device: str, compression: dict | None = None) -> str:
    """<task>/<model>/<engine>[-b<budget>][-fp8]-n<n>-len<max_tokens>[-lim<limit>]-s<seed>-
    <hash>, from the values that ran (CPU clamps applied); the same command maps to the same
    folder. An fp8 KV cache is in the name and the hash (never a bf16 run's folder)."""
    e, s = eff.engine, eff.sampling
    b = f"-b{e.budget}" if e.budget is not None else ""
    kv = kv_cache_dtype(eff)
    b += "" if kv == "auto" else f"-{kv}"
    lim = f"-lim{eff.task.limit}" if eff.task.limit is not None else ""
    return (f"{eff.task.name}/{eff.model.name}/{e.name}{b}-n{s.n}-len{s.max_tokens}{lim}"
            f"-s{eff.seed}-{digest(settings(eff, device, compression), 8)}")


def problems_digest(task, problems) -> str:
    return digest([[p.id, task.messages(p)] for p in problems])


def prompt_hash(ids: list[int]) -> str:
    return hashlib.sha256(json.dumps(list(ids)).encode()).hexdigest()[:16]


def tokenizer_digest(tok) -> str:
    vocab = tok.get_vocab() if callable(getattr(tok, "get_vocab", None)) else None
    return digest({"class": type(tok).__name__, "vocab": sorted(vocab.items()) if vocab else None,
                   "chat_template": getattr(tok, "chat_template", None),
                   "special": str(getattr(tok, "all_special_tokens", None))})


def identity(eff, device: str, task, problems, compression: dict | None = None) -> dict:
    """The parts known before the model loads (`prompts`/`tokenizer` are added later)."""
    return {"settings": digest(settings(eff, device, compression)), "task_version": task.version,
            "problems": problems_digest(task, problems), "prompts": None, "tokenizer": None}


def with_prompts(ident: dict, tokenizer, prompts: list[list[int]]) -> dict:
    return {**ident, "prompts": digest([prompt_hash(p) for p in prompts]),
            "tokenizer": tokenizer_digest(tokenizer)}


def differences(old: dict, new: dict) -> list[str]:
    """The parts two identities both know and disagree on, described for a person."""
    return [f"{WHAT[k]} ({old[k]} -> {new[k]})" for k in WHAT
            if old.get(k) is not None and new.get(k) is not None and old[k] != new[k]]


def _flat(tree, prefix: str = "") -> dict:
    if not isinstance(tree, dict):
        return {prefix[:-1]: tree}
    return {k: v for key, sub in tree.items() for k, v in _flat(sub, f"{prefix}{key}.").items()}


def changed_keys(old_eff, old_device: str, new_eff, new_device: str) -> str:
    """The `settings` keys (the run identity's) that differ between a folder's config.yaml
    and device (`old_*`) and the new run's, as `key old -> new`, the first five of more than
    six (empty if none of them differ)."""
    old, new = (_flat(settings(eff, device))
                for eff, device in ((old_eff, old_device), (new_eff, new_device)))
    diff = [f"{k} {old.get(k)} -> {new.get(k)}"  # engine.name before engine.compression.*
            for k in sorted(old.keys() | new.keys(), key=lambda k: (k.count("."), k))
            if old.get(k) != new.get(k)]
    more = f", and {len(diff) - 5} more" if len(diff) > 6 else ""
    return ", ".join(diff[:5] if more else diff) + more


# Parts of the identity a Full-KV baseline must share with the run it is compared with.
SHARED_WITH_BASELINE = ("task_version", "problems", "prompts", "tokenizer")


def _shared(meta: dict | None) -> dict:
    found = (meta or {}).get("identity") or {}
    return {k: found.get(k) for k in SHARED_WITH_BASELINE}


def baseline_mismatch(run_meta: dict | None, base_meta: dict | None) -> list[str]:
    """What a baseline and the run compared with it do not share (parts both recorded)."""
    return differences(_shared(base_meta), _shared(run_meta))


def refusal(folder: str, changed: list[str], what: str = "samples") -> str:
    return (f"{folder} holds {what} of a different run; since they were generated, "
            f"{'; '.join(changed)} changed. Nothing was written. To start fresh, delete the "
            f"folder (rm -r {folder}) or pick another one (run_dir=...); to continue it, "
            f"restore what changed.")


def read_meta(folder: str) -> dict | None:
    path = os.path.join(folder, "run.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)
