"""The shared jit steps of zipage/kernels/paged_tiles.py, on their own."""
import pytest
import torch

from zipage.kernels._dispatch import tl, triton
from zipage.kernels.block_tables import flat_slots
from zipage.kernels.paged_tiles import dot_args, dot_operand, paged_offsets


@triton.jit
def _dot_operand_kernel(x_ptr, out_ptr, N: tl.constexpr, DOT_DTYPE: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(out_ptr + i, dot_operand(tl.load(x_ptr + i), DOT_DTYPE).to(tl.float32))


@triton.jit
def _offsets_kernel(table_ptr, out_ptr, n, stride_block, stride_slot, N: tl.constexpr,
                    BLOCK_SIZE: tl.constexpr):
    pos = tl.arange(0, N)
    ok = pos < n
    tl.store(out_ptr + pos, paged_offsets(table_ptr, pos, ok, stride_block, stride_slot,
                                          BLOCK_SIZE), mask=ok)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_dot_operand_rounds_to_nearest_even_like_torch(triton_cpu, dtype):
    """fp32 tiles become dot operands rounded exactly as torch rounds (the interpreter's own
    bf16 cast truncates); exact ties included."""
    ties = torch.tensor([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 1 + 2**-11, 1 + 3 * 2**-11])
    x = torch.cat([ties, 100 * torch.randn(123)]).float()
    out = torch.empty_like(x)
    _dot_operand_kernel[(1,)](x, out, N=128, DOT_DTYPE=dot_args(dtype)["DOT_DTYPE"])
    assert torch.equal(out, x.to(dtype).float())
    x16 = x.to(dtype)  # operands already in the half type pass unchanged
    _dot_operand_kernel[(1,)](x16, out, N=128, DOT_DTYPE=dot_args(dtype)["DOT_DTYPE"])
    assert torch.equal(out, x16.float())


@pytest.mark.parametrize("block_size", [1, 16, 24])
def test_paged_offsets_follow_the_block_table(triton_cpu, block_size):
    """Offsets of positions 0..n-1 are those of their flat slots; masked lanes store nothing."""
    table = torch.full((9,), -1, dtype=torch.int32)
    table[:5] = torch.randperm(40)[:5].int()
    n = 5 * block_size - 3
    out = torch.full((256,), -7, dtype=torch.int64)
    stride_slot = 3 * 64  # (H_kv, D) per slot
    _offsets_kernel[(1,)](table, out, n, block_size * stride_slot, stride_slot, N=256,
                          BLOCK_SIZE=block_size)
    assert torch.equal(out[:n], flat_slots(table, n, block_size) * stride_slot)
    assert bool((out[n:] == -7).all())
