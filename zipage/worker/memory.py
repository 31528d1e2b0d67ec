"""How many KV blocks fit: measured free GPU memory, or an explicit pool size on the CPU."""
from dataclasses import dataclass

import torch

from zipage.models.spec import ModelSpec


@dataclass
class MemoryPlan:
    num_blocks: int
    num_query_slots: int
    block_bytes: int
    query_slot_bytes: int
    kv_cache_dtype: str = "auto"
    model_block_bytes: int = 0  # a block in the model dtype (for kv_cache_dtype="fp8")

    def describe(self, block_size: int, max_model_len: int, num_kept_blocks: int | None) -> str:
        gib = self.num_blocks * self.block_bytes / 2**30
        full = self.num_blocks // -(-max_model_len // block_size)
        fp8 = ""
        if self.kv_cache_dtype == "fp8":
            fp8 = (f", fp8 e4m3 + scales: {self.model_block_bytes / self.block_bytes:.2f}x the "
                   f"tokens per byte of the model dtype")
        text = (f"KV cache: {self.num_blocks} blocks x {block_size} tokens "
                f"({self.num_blocks * block_size} tokens, {gib:.2f} GiB{fp8}); "
                f"Full-KV concurrency at max_model_len={max_model_len}: {full}")
        if num_kept_blocks is not None:
            text += (f"; compressed concurrency at {num_kept_blocks + 1} blocks/request: "
                     f"{self.num_blocks // (num_kept_blocks + 1)} "
                     f"({self.num_query_slots} query slots)")
        return text


def bytes_per_block(spec: ModelSpec, block_size: int, dtype: torch.dtype, with_score: bool,
                    kv_cache_dtype: str = "auto") -> int:
    """K and V (fp8: one byte per element plus a float32 scale each per (token, head)) and
    the global score (model dtype) of one block, all layers."""
    item = torch.tensor([], dtype=dtype).element_size()
    kv = 2 * (spec.head_dim + 4) if kv_cache_dtype == "fp8" else 2 * spec.head_dim * item
    per_token = spec.num_layers * spec.num_kv_heads * (kv + int(with_score) * item)
    return per_token * block_size


def bytes_per_query_slot(spec: ModelSpec, window: int, dtype: torch.dtype) -> int:
    item = torch.tensor([], dtype=dtype).element_size()
    return spec.num_layers * window * spec.num_heads * spec.head_dim * item


def plan_kv_pool(spec: ModelSpec, cfg, dtype: torch.dtype, max_model_len: int,
                 total_bytes: int | None = None, non_kv_bytes: int = 0) -> MemoryPlan:
    """The pool, by arithmetic only: on a device of ``total_bytes`` of which ``non_kv_bytes``
    hold weights, activations and other processes; ``total_bytes=None`` (or an explicit
    ``kv_cache_tokens``): the explicit / CPU rule. The simulator sizes pools with it."""
    with_score = cfg.budget is not None and bool(cfg.compression.use_global_score)
    kv_dtype = getattr(cfg, "kv_cache_dtype", "auto")
    block = bytes_per_block(spec, cfg.block_size, dtype, with_score, kv_dtype)
    extra = dict(kv_cache_dtype=kv_dtype,
                 model_block_bytes=bytes_per_block(spec, cfg.block_size, dtype, with_score))
    slots = cfg.max_num_seqs if cfg.budget is not None else 0
    slot_bytes = bytes_per_query_slot(spec, cfg.observation_window, dtype)
    if cfg.kv_cache_tokens is not None or total_bytes is None:
        tokens = cfg.kv_cache_tokens or max(16384, 2 * max_model_len)
        return MemoryPlan(-(-tokens // cfg.block_size), slots, block, slot_bytes, **extra)
    available = total_bytes * cfg.gpu_memory_utilization - non_kv_bytes - slots * slot_bytes
    num_blocks = int(available // block)
    if num_blocks <= 0:
        raise RuntimeError(f"no GPU memory left for the KV cache (weights, activations and other "
                           f"processes take {non_kv_bytes / 2**30:.1f} GiB); raise "
                           f"gpu_memory_utilization or lower max_num_batched_tokens")
    return MemoryPlan(num_blocks, slots, block, slot_bytes, **extra)


def plan_memory(spec, cfg, dtype, device, peak_bytes: int, max_model_len: int) -> MemoryPlan:
    if cfg.kv_cache_tokens is not None or device.type != "cuda":
        return plan_kv_pool(spec, cfg, dtype, max_model_len)
    free, total = torch.cuda.mem_get_info(device)
    used_by_others = total - free - torch.cuda.memory_reserved(device)
    return plan_kv_pool(spec, cfg, dtype, max_model_len, total, used_by_others + peak_bytes)
