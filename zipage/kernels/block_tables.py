"""Block tables on the host: flat slots of a request's positions, gathering those positions
from a layered paged cache (the compression references), and the wrappers' table checks.
The kernels' side of the same arithmetic is paged_tiles.paged_offsets."""
import torch


def flat_slots(table_row: torch.Tensor, n: int, b: int) -> torch.Tensor:
    """Flat physical slots (block * b + offset) of the first n positions of one block table.

    table_row: int (n_blocks,), -1 padded; returns int64 (n,).
    """
    j = torch.arange(n, device=table_row.device)
    return table_row.long()[j // b] * b + j % b


def gather_positions(cache: torch.Tensor, table_row: torch.Tensor, n: int) -> torch.Tensor:
    """(L, NB, b, ...) cache -> (L, n, ...) rows of the first n positions of one request."""
    L, NB, b = cache.shape[:3]
    return cache.reshape(L, NB * b, *cache.shape[3:])[:, flat_slots(table_row, n, b)]


def check_tables(block_tables: torch.Tensor, phys_lens: torch.Tensor) -> None:
    """Shape/dtype checks common to the compression wrappers (no device sync)."""
    if block_tables.dim() != 2 or block_tables.dtype != torch.int32:
        raise ValueError("block_tables must be int32 (B, n_max)")
    if phys_lens.shape != (block_tables.shape[0],) or phys_lens.dtype != torch.int32:
        raise ValueError("phys_lens must be int32 (B,)")
