"""The tensor-parallel group of one engine: its rank, its size, and the collectives the model
needs. With one rank every collective is skipped: the single-device path does no extra work.

Rendezvous goes through a FileStore in a directory private to the engine (no port, no
shared-memory name), so several engines on one host never meet each other's ranks.
"""
import os
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

# torch 2.13 renamed it; the GPU machines run 2.11.
_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


@dataclass(frozen=True)
class TPGroup:
    rank: int = 0
    size: int = 1
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    group: object = None  # torch ProcessGroup; None for a single rank

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        """Sum over ranks, in place."""
        if self.size > 1:
            dist.all_reduce(x, group=self.group)
        return x

    def all_gather(self, x: torch.Tensor) -> torch.Tensor:
        """x (T, ...) on each rank -> (size, T, ...), rank order, identical on every rank."""
        if self.size == 1:
            return x.unsqueeze(0)
        out = x.new_empty((self.size * x.shape[0], *x.shape[1:]))  # gloo: concatenated form only
        _all_gather(out, x.contiguous(), group=self.group)
        return out.view(self.size, *x.shape)

    def min(self, value: int) -> int:
        """The smallest value over ranks (memory planning: what every rank can hold)."""
        if self.size == 1:
            return int(value)
        t = torch.tensor([int(value)], dtype=torch.int64, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MIN, group=self.group)
        return int(t.item())

    def barrier(self) -> None:
        if self.size > 1:
            dist.barrier(group=self.group)


SINGLE = TPGroup()


def rank_device(device_type: str, rank: int) -> torch.device:
    """Rank r of a group uses GPU r of the host (or the CPU)."""
    return torch.device("cuda", rank) if device_type == "cuda" else torch.device("cpu")


def init_tp_group(rank: int, size: int, store_path: str, device: torch.device) -> TPGroup:
    """Join the group whose rendezvous file is `store_path` (NCCL on CUDA, gloo on the CPU)."""
    if size == 1:
        return TPGroup(device=device)
    if device.type == "cuda":
        # NVLink multicast (NVLS) stays off: it reserves GPU memory per communicator, and the
        # shared multi-GPU machines must not use it. Must be set before NCCL initialises.
        os.environ["NCCL_NVLS_ENABLE"] = "0"
        torch.cuda.set_device(device)
    backend = "nccl" if device.type == "cuda" else "gloo"
    store = dist.FileStore(store_path, size)
    dist.init_process_group(backend, store=store, rank=rank, world_size=size,
                            device_id=device if device.type == "cuda" else None)
    return TPGroup(rank, size, device, dist.group.WORLD)


def destroy_tp_group() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
