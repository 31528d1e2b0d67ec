"""Structured config schema for run.py (Hydra ConfigStore). The YAML files under configs/
extend these dataclasses, so a misspelled key or a wrong type fails at composition time;
`unknown_keys` (and tasks/overrides.py, on the command line) also catch keys added with `+`
(Hydra lets those through), naming the close match."""
from __future__ import annotations

import dataclasses
import os
import typing
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from omegaconf import MISSING, DictConfig

from tasks.base import close_match


@dataclass
class ModelCfg:
    name: str = MISSING                  # engine preset name, e.g. "smollm2-135m", "qwen3-8b"
    hub_id: Optional[str] = None         # for reference only (the engine resolves `name`)
    path: Optional[str] = None           # a checkpoint folder (config.json) or .gguf file:
                                         # what loads; the run is labelled by its name and,
                                         # unless set here, `thinking` is read from its chat
                                         # template (tasks/model_choice.py)
    thinking: bool = False               # reasons in <think>...</think>: only text after the
                                         # last </think> is scored (none if it never closes)
    chat_template_kwargs: Dict[str, Any] = field(default_factory=dict)  # e.g. enable_thinking
    system_prompt: Optional[str] = None


@dataclass
class HFCfg:
    """Overrides of the task's own hub source (tasks/math_tasks.py); null keeps the task's."""
    path: Optional[str] = None
    name: Optional[str] = None
    split: Optional[str] = None
    revision: Optional[str] = None       # a commit; null: the current one, pinned at planning
    columns: Optional[Dict[str, str]] = None  # hub column -> our field
    answer_rule: Optional[str] = None    # after_hashes | boxed | none (tasks/hub_answers.py)


@dataclass
class TaskCfg:
    name: str = MISSING                  # a registered task (tasks/base.py registry)
    limit: Optional[int] = None          # first N problems (the whole file is validated)
    data_file: Optional[str] = None      # in data_dir, else the current directory; null: default
    hf: HFCfg = field(default_factory=HFCfg)
    options: Dict[str, Any] = field(default_factory=dict)  # the task's typed options


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
    kv_cache_dtype: Optional[str] = None  # null/"auto": the model dtype; "fp8": e4m3 + scales
    fp8_key_rotation: Optional[bool] = None  # fp8: q, k Hadamard-rotated first (null: on)
    fp8_decode: Optional[str] = None     # fp8: "f16" (null: the default) or "e4m3" MMAs
    dtype: Optional[str] = None
    device: str = "auto"
    enforce_eager: Optional[bool] = None
    enable_prefix_caching: Optional[bool] = None
    tensor_parallel_size: Optional[int] = None   # GPUs per engine (one process per rank)
    data_parallel_size: int = 1          # engines (replicas) splitting the problems; harness only
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
    timeout_s: float = 5.0               # math-verify timeout per sample, whole seconds
    penalize_truncated: bool = True      # outputs cut at max_tokens count as wrong


@dataclass
class BaselineCfg:
    enabled: bool = True                 # compare a compressed run with Full KV
    only: bool = False                   # generate only this run's Full-KV baseline (sweeps)
    cache_dir: str = "${results_dir}/_baselines"
    retime: bool = False                 # time Full KV and this engine again, back to back in
                                         # this job, on a sample of problems: speedup uses it
    retime_problems: int = 4             # problems in that sample (all n samples of each)


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
    run_dir: Optional[str] = None        # null: <results_dir>/<task>/<model>/<what ran>
    use_tqdm: bool = True
    cpu: CpuCfg = field(default_factory=CpuCfg)
    scoring: ScoringCfg = field(default_factory=ScoringCfg)
    baseline: BaselineCfg = field(default_factory=BaselineCfg)


CONFIG_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")
GROUPS = {"model": ModelCfg, "task": TaskCfg, "engine": EngineCfg, "sampling": SamplingCfg}


def is_mapping(tp) -> bool:
    """A free-form mapping field (its keys are checked by whoever reads it)."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    return typing.get_origin(tp) is dict or any(typing.get_origin(a) is dict for a in args)


def unknown_keys(cfg: DictConfig, schema=Config, prefix: str = "") -> list[str]:
    """Keys of a composed config that its schema lacks (each with a close-match hint)."""
    out, types = [], typing.get_type_hints(schema)
    for key in cfg.keys():
        path = f"{prefix}{key}"
        if key not in types:
            near = close_match(path, [f"{prefix}{k}" for k in types])
            out.append(f"{path!r}{near}")
        elif dataclasses.is_dataclass(types[key]) and not is_mapping(types[key]):
            node = cfg._get_node(key)
            if isinstance(node, DictConfig) and not node._is_missing() and not node._is_none():
                out += unknown_keys(node, types[key], f"{path}.")
    return out


def register_configs() -> None:
    from hydra.core.config_store import ConfigStore
    cs = ConfigStore.instance()
    cs.store(name="base_config", node=Config)
    for group, node in GROUPS.items():
        cs.store(group=group, name=f"base_{group}", node=node)
