"""Backend choice shared by every kernel file.

Triton runs when tensors are on CUDA, or on CPU tensors when TRITON_INTERPRET=1 (the
Triton interpreter, used by the tests); otherwise the PyTorch reference runs.
"""
import os

import torch

# Read once, at import: triton.jit decides at decoration time whether a kernel is
# interpreted, so dispatch must agree with the value seen when the kernels were defined.
INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

try:
    import triton
    import triton.language as tl

    HAS_TRITON = True
except ImportError:  # keep kernel modules importable (reference path only)
    HAS_TRITON = False

    class _TlStub:
        float32 = bfloat16 = float16 = None

        @staticmethod
        def constexpr(value=None):
            return value

    class _TritonStub:
        @staticmethod
        def jit(fn=None, **_):
            return fn if fn is not None else (lambda f: f)

    triton, tl = _TritonStub(), _TlStub()


def use_triton(tensor: torch.Tensor) -> bool:
    """True if the Triton kernel should handle `tensor` (CUDA, or CPU under the interpreter)."""
    if not HAS_TRITON:
        return False
    return tensor.is_cuda or (INTERPRET and tensor.device.type == "cpu")


def next_pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def cdiv(a: int, b: int) -> int:
    return -(-a // b)
