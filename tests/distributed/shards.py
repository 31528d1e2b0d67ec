"""Put the shards of a tensor-parallel model back together (test helper)."""
import torch


def rebuild(param, shards: list[torch.Tensor]) -> torch.Tensor:
    """The one-rank tensor from the ranks' shards of `param` (a parameter of the one-rank
    model, which carries the layout: tp_dim, tp_parts); padding rows dropped."""
    dim = getattr(param, "tp_dim", None)
    if dim is None:
        assert all(torch.equal(s, shards[0]) for s in shards[1:]), "replicated tensors differ"
        return shards[0]
    n = len(shards)
    local = [-(-p // n) for p in param.tp_parts]
    per_rank = [s.split(local, dim) for s in shards]
    return torch.cat([torch.cat([r[i] for r in per_rank], dim).narrow(dim, 0, p)
                      for i, p in enumerate(param.tp_parts)], dim)
