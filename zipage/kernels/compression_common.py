"""Helpers shared by the compression kernel files (compress_*.py)."""
import torch

from zipage.kernels._dispatch import INTERPRET, tl, triton

# constexpr for the kernels: route half-precision dots through fp32 in the interpreter
UPCAST_DOTS = INTERPRET


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
    """Shape/dtype checks common to every wrapper (no device sync)."""
    if block_tables.dim() != 2 or block_tables.dtype != torch.int32:
        raise ValueError("block_tables must be int32 (B, n_max)")
    if phys_lens.shape != (block_tables.shape[0],) or phys_lens.dtype != torch.int32:
        raise ValueError("phys_lens must be int32 (B,)")


@triton.jit
def dot_f32(a, b, PRECISION: tl.constexpr, UPCAST: tl.constexpr):
    """a @ b accumulated in fp32. UPCAST (interpreter only): bf16/fp16 operands go through
    fp32 first, because the Triton interpreter's half-precision tl.dot is wrong; products of
    half-precision values are exact in fp32, so the result matches the compiled path."""
    if UPCAST:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    return tl.dot(a, b, input_precision=PRECISION)


@triton.jit
def round_like(x, ref_ptr, UPCAST: tl.constexpr):
    """fp32 x rounded to the element type of ref_ptr (round to nearest even). In the
    interpreter (UPCAST) a bf16 result stays an fp32 tensor holding the bf16 value, since the
    interpreter's fp32 -> bf16 cast truncates and its bf16 tl.dot is wrong."""
    if UPCAST:  # constexpr: the compiled kernel only sees the last line
        if ref_ptr.dtype.element_ty == tl.bfloat16:
            bits = x.to(tl.uint32, bitcast=True)
            bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
            return bits.to(tl.float32, bitcast=True)
    return x.to(ref_ptr.dtype.element_ty)
