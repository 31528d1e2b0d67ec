"""Structured config schema for run.py (Hydra ConfigStore). The YAML files under configs/
extend these dataclasses, so a misspelled key or a wrong type fails at composition time."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from omegaconf import MISSING, OmegaConf


@dataclass
class ModelCfg:
    name: str = MISSING                  # engine preset name, e.g. "smollm2-135m", "qwen3-8b"
    hub_id: Optional[str] = None         # for reference only (the engine resolves `name`)
    path: Optional[str] = None           # local checkpoint dir / GGUF file: overrides `name`
    thinking: bool = False               # reasons in <think>...</think>: only text after the
                                         # last </think> is scored (none if it never closes)
    chat_template_kwargs: Dict[str, Any] = field(default_factory=dict)  # e.g. enable_thinking
    system_prompt: Optional[str] = None


@dataclass
class HFCfg:
    path: Optional[str] = None
    name: Optional[str] = None
    split: str = "test"
    revision: Optional[str] = None       # a pinned commit; required to load from the hub
    columns: Dict[str, str] = field(default_factory=dict)  # hub column -> our field


@dataclass
class TaskCfg:
    name: str = MISSING                  # a registered task (tasks/base.py registry)
    limit: Optional[int] = None          # first N problems
    data_file: Optional[str] = None      # default <name>.jsonl inside data_dir
    hf: HFCfg = field(default_factory=HFCfg)
    options: Dict[str, Any] = field(default_factory=dict)  # task-specific knobs


@dataclass
class EngineCfg:
    """Thin pass-through: every non-null field except `name` becomes an LLM(...) kwarg."""
    name: str = MISSING                  # "zipage" or "fullkv" (harness label only)
    budget: Optional[int] = None         # KV tokens per request; null = Full KV
    block_size: int = 256
    observation_window: Optional[int] = None
    max_num_seqs: Optional[int] = None
    max_num_batched_tokens: Optional[int] = None
    max_model_len: Optional[int] = None
    gpu_memory_utilization: Optional[float] = None
    kv_cache_tokens: Optional[int] = None
    dtype: Optional[str] = None
    device: str = "auto"
    enforce_eager: Optional[bool] = None
    enable_prefix_caching: Optional[bool] = None
    tensor_parallel_size: Optional[int] = None
    load_format: Optional[str] = None
    compression: Dict[str, Any] = field(default_factory=dict)  # LLM(compression=...) verbatim
    extra: Dict[str, Any] = field(default_factory=dict)        # any other engine kwarg, verbatim


@dataclass
class SamplingCfg:
    n: int = 32
    temperature: float = 0.6
    top_p: float = 1.0
    max_tokens: int = 32768


@dataclass
class CpuCfg:
    """Clamps applied only when the engine runs on CPU, so a run finishes in minutes."""
    enabled: bool = True
    max_tokens: int = 256
    n: int = 2
    limit: int = 4
    budget: int = 128
    block_size: int = 16
    max_model_len: int = 2048            # keeps the CPU KV pool small


@dataclass
class ScoringCfg:
    workers: int = 0                     # 0 = one per CPU core
    timeout_s: float = 5.0               # math-verify parse/verify timeout per sample
    penalize_truncated: bool = True      # outputs cut at max_tokens count as wrong


@dataclass
class BaselineCfg:
    enabled: bool = True                 # compare a compressed run with Full KV
    only: bool = False                   # generate only this run's Full-KV baseline (sweeps)
    cache_dir: str = "${results_dir}/_baselines"


@dataclass
class Config:
    model: ModelCfg = MISSING
    task: TaskCfg = MISSING
    engine: EngineCfg = MISSING
    sampling: SamplingCfg = MISSING
    budget: Optional[int] = 2048
    seed: int = 0
    data_dir: Optional[str] = "${oc.env:ZIPAGE_DATA_DIR,null}"
    results_dir: str = "results"
    use_tqdm: bool = True
    cpu: CpuCfg = field(default_factory=CpuCfg)
    scoring: ScoringCfg = field(default_factory=ScoringCfg)
    baseline: BaselineCfg = field(default_factory=BaselineCfg)


def config_hash(*parts: Any) -> str:
    """Short stable hash of config nodes / plain values (run and baseline identity)."""
    plain = [OmegaConf.to_container(p, resolve=True) if OmegaConf.is_config(p) else p
             for p in parts]
    return hashlib.sha1(json.dumps(plain, sort_keys=True, default=str).encode()).hexdigest()[:8]


def run_name(engine, sampling, model, task, seed, cpu=None) -> str:
    """Readable, deterministic run folder name: the same command maps to the same folder
    (the hash covers everything that changes the generations, CPU clamps included)."""
    b = f"-b{engine.budget}" if engine.budget is not None else ""
    lim = f"-lim{task.limit}" if task.limit is not None else ""
    return (f"{task.name}/{model.name}/{engine.name}{b}-n{sampling.n}-len{sampling.max_tokens}"
            f"{lim}-s{seed}-{config_hash(engine, sampling, model, task, seed, cpu)}")


def register_configs() -> None:
    from hydra.core.config_store import ConfigStore
    if not OmegaConf.has_resolver("run_name"):
        OmegaConf.register_new_resolver("run_name", run_name)
    cs = ConfigStore.instance()
    cs.store(name="base_config", node=Config)
    for group, node in [("model", ModelCfg), ("task", TaskCfg), ("engine", EngineCfg),
                        ("sampling", SamplingCfg)]:
        cs.store(group=group, name=f"base_{group}", node=node)
