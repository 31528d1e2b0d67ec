"""Model shape arithmetic without weights: parameter bytes, KV bytes per token, and the
KV pool of a device of given memory (the engine's own planning, zipage/worker/memory.py)."""
from dataclasses import dataclass

import torch

from zipage.config import EngineConfig
from zipage.models.loader import load_hf_config, resolve
from zipage.models.spec import ModelSpec, spec_from_hf_config
from zipage.worker.memory import MemoryPlan, plan_kv_pool

# Device memory besides the KV pool when no calibration measured it: weights plus this
# much for activations, CUDA context and workspaces (an estimate; calibration measures it).
DEFAULT_OVERHEAD_BYTES = 3 * 2**30


def model_spec(model: str) -> ModelSpec:
    """A preset name (qwen3-8b, ...) or a checkpoint folder: its config only."""
    path, gguf = resolve(model, "dummy")
    return spec_from_hf_config(load_hf_config(path, gguf))


def itemsize(dtype: torch.dtype) -> int:
    return torch.tensor([], dtype=dtype).element_size()


def parameter_counts(spec: ModelSpec) -> tuple[int, int]:
    """(all parameters, parameters a decode step reads: all but the input embedding, which
    gathers one row per token, unless it is tied to the LM head)."""
    h, q, kv = spec.hidden_size, spec.num_heads * spec.head_dim, spec.num_kv_heads * spec.head_dim
    layer = h * q + 2 * h * kv + q * h + 3 * h * spec.intermediate_size + 2 * h
    if spec.qkv_bias:
        layer += q + 2 * kv
    if spec.qk_norm:
        layer += 2 * spec.head_dim
    embed = spec.vocab_size * h
    total = spec.num_layers * layer + h + embed + (0 if spec.tie_word_embeddings else embed)
    return total, total if spec.tie_word_embeddings else total - embed


def kv_bytes_per_token(spec: ModelSpec, dtype: torch.dtype, kv_cache_dtype: str = "auto") -> int:
    """K and V bytes of one token, all layers (fp8: 1 byte per element + float32 scales)."""
    if kv_cache_dtype == "fp8":
        return spec.num_layers * spec.num_kv_heads * (spec.head_dim + 4) * 2
    return spec.num_layers * spec.num_kv_heads * spec.head_dim * 2 * itemsize(dtype)


@dataclass(frozen=True)
class DeviceMemory:
    """A device for pool sizing: its memory and what the model takes besides the KV pool."""
    total_bytes: int
    non_kv_bytes: int
    source: str  # "calibrated" | "estimated"


def estimated_memory(spec: ModelSpec, dtype: torch.dtype, total_bytes: int) -> DeviceMemory:
    weights = parameter_counts(spec)[0] * itemsize(dtype)
    return DeviceMemory(total_bytes, weights + DEFAULT_OVERHEAD_BYTES, "estimated")


def plan_pool(spec: ModelSpec, cfg: EngineConfig, dtype: torch.dtype, max_model_len: int,
              memory: DeviceMemory | None) -> MemoryPlan:
    """The pool the engine would allocate: ``cfg.kv_cache_tokens`` if set, else the whole
    device (``memory``) at ``cfg.gpu_memory_utilization``."""
    if cfg.kv_cache_tokens is not None or memory is None:
        if cfg.kv_cache_tokens is None:
            raise ValueError("size the pool: give kv_cache_tokens or a device memory")
        return plan_kv_pool(spec, cfg, dtype, max_model_len)
    return plan_kv_pool(spec, cfg, dtype, max_model_len, memory.total_bytes, memory.non_kv_bytes)
