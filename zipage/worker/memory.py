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

    def describe(self, block_size: int, max_model_len: int, num_kept_blocks: int | None) -> str:
        gib = self.num_blocks * self.block_bytes / 2**30
        full = self.num_blocks // -(-max_model_len // block_size)
        text = (f"KV cache: {self.num_blocks} blocks x {block_size} tokens "
                f"({self.num_blocks * block_size} tokens, {gib:.2f} GiB); "
                f"Full-KV concurrency at max_model_len={max_model_len}: {full}")
        if num_kept_blocks is not None:
            text += (f"; compressed concurrency at {num_kept_blocks + 1} blocks/request: "
                     f"{self.num_blocks // (num_kept_blocks + 1)} "
                     f"({self.num_query_slots} query slots)")
        return text


def bytes_per_block(spec: ModelSpec, block_size: int, dtype: torch.dtype, with_score: bool) -> int:
    item = torch.tensor([], dtype=dtype).element_size()
    per_token = spec.num_layers * spec.num_kv_heads * (2 * spec.head_dim + int(with_score))
    return per_token * block_size * item


def bytes_per_query_slot(spec: ModelSpec, window: int, dtype: torch.dtype) -> int:
    item = torch.tensor([], dtype=dtype).element_size()
    return spec.num_layers * window * spec.num_heads * spec.head_dim * item


def plan_memory(spec, cfg, dtype, device, peak_bytes: int, max_model_len: int) -> MemoryPlan:
    with_score = cfg.budget is not None and bool(cfg.compression.use_global_score)
    block = bytes_per_block(spec, cfg.block_size, dtype, with_score)
    slots = cfg.max_num_seqs if cfg.budget is not None else 0
    slot_bytes = bytes_per_query_slot(spec, cfg.observation_window, dtype)
    if cfg.kv_cache_tokens is not None or device.type != "cuda":
        tokens = cfg.kv_cache_tokens or max(16384, 2 * max_model_len)
        return MemoryPlan(-(-tokens // cfg.block_size), slots, block, slot_bytes)
    free, total = torch.cuda.mem_get_info(device)
    used_by_others = total - free - torch.cuda.memory_reserved(device)
    available = total * cfg.gpu_memory_utilization - used_by_others - peak_bytes
    available -= slots * slot_bytes
    num_blocks = int(available // block)
    if num_blocks <= 0:
        raise RuntimeError(f"no GPU memory left for the KV cache (weights and activations take "
                           f"{peak_bytes / 2**30:.1f} GiB); raise gpu_memory_utilization or lower "
                           f"max_num_batched_tokens")
    return MemoryPlan(num_blocks, slots, block, slot_bytes)
