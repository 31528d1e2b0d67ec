"""Linear layers split over the ranks of a tensor-parallel group (Megatron layout).

Column-parallel: each rank holds a slice of the output features and needs no communication.
A fused projection ([q; k; v], [gate; up]) is split part by part, so rank r holds
[q_r; k_r; v_r]: whole heads of each, and the local output still splits into q, k, v.
Row-parallel: each rank holds a slice of the input features; one all-reduce sums the partial
products. With one rank both are a plain linear layer.

A sharded parameter records how it is cut: `tp_dim` and `tp_parts` (the full size of each
part along that dim). `load_shard` copies this rank's share of a full tensor into it.
"""
import torch
from torch import nn
import torch.nn.functional as F

from zipage.distributed.group import SINGLE, TPGroup


def sharded(tensor: torch.Tensor, dim: int, parts) -> nn.Parameter:
    param = nn.Parameter(tensor, requires_grad=False)
    param.tp_dim, param.tp_parts = dim, tuple(parts)
    return param


def shard_size(full: int, tp: TPGroup) -> int:
    """Rows of a part on each rank (the last ranks are zero-padded when `full` is uneven)."""
    return -(-full // tp.size)


def full_shape(param: nn.Parameter) -> tuple[int, ...]:
    """The parameter's shape with one rank (what a checkpoint or dummy init provides)."""
    shape = list(param.shape)
    if getattr(param, "tp_dim", None) is not None:
        shape[param.tp_dim] = sum(param.tp_parts)
    return tuple(shape)


def load_shard(param: nn.Parameter, full, tp: TPGroup, part: int = 0) -> None:
    """Copy this rank's share of `full` (part `part` of the parameter, all ranks' rows: a
    tensor or a lazy safetensors slice, which then reads only this rank's rows)."""
    shape = tuple(full.shape) if isinstance(full, torch.Tensor) else tuple(full.get_shape())
    dim = getattr(param, "tp_dim", None)
    expected = list(full_shape(param))
    if dim is not None:
        expected[dim] = param.tp_parts[part]
    if shape != tuple(expected):
        raise ValueError(f"tensor of shape {list(shape)} does not fit a parameter of "
                         f"shape {expected}")
    if dim is None:
        param.data.copy_(full[:])
        return
    size = param.tp_parts[part]
    local = shard_size(size, tp)
    offset = sum(shard_size(p, tp) for p in param.tp_parts[:part])
    start, stop = min(size, tp.rank * local), min(size, (tp.rank + 1) * local)
    dst = param.data.narrow(dim, offset, local)
    dst.narrow(dim, 0, stop - start).copy_(full[start:stop] if dim == 0 else full[:, start:stop])
    dst.narrow(dim, stop - start, local - (stop - start)).zero_()


class ColumnParallelLinear(nn.Module):
    """y = x W^T + b, W's output rows split over ranks: (T, in) -> (T, sum(part_sizes)/N)."""

    def __init__(self, in_features: int, part_sizes: list[int], bias: bool, tp: TPGroup = SINGLE):
        super().__init__()
        uneven = [s for s in part_sizes if s % tp.size]
        if uneven:
            raise ValueError(f"output sizes {uneven} do not split over {tp.size} ranks")
        out = sum(part_sizes) // tp.size
        self.weight = sharded(torch.empty(out, in_features), 0, part_sizes)
        self.bias = sharded(torch.empty(out), 0, part_sizes) if bias else None

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)


class RowParallelLinear(nn.Module):
    """y = x W^T (no bias), W's input columns split over ranks: (T, in/N) -> (T, out), summed
    over ranks."""

    def __init__(self, in_features: int, out_features: int, tp: TPGroup = SINGLE):
        super().__init__()
        if in_features % tp.size:
            raise ValueError(f"input size {in_features} does not split over {tp.size} ranks")
        self.tp = tp
        self.weight = sharded(torch.empty(out_features, in_features // tp.size), 1, [in_features])

    def forward(self, x):
        return self.tp.all_reduce(F.linear(x, self.weight))
