"""Shared setup of the kernel test folders: Triton kernels run in the CPU interpreter.

TRITON_INTERPRET must be set before triton (and zipage.kernels) is imported, because
triton.jit picks the interpreter at decoration time; each conftest imports this first.
"""
import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

from zipage.kernels import use_triton  # noqa: E402


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture
def triton_cpu():
    """Skip when the Triton path is not what the wrappers would run on CPU here."""
    if not use_triton(torch.empty(0)):
        if os.environ.get("ZIPAGE_REQUIRE_TRITON") == "1":  # CI: a skipped kernel check is a failure
            pytest.fail("Triton interpreter unavailable")
        pytest.skip("Triton interpreter unavailable (triton missing or imported earlier "
                    "without TRITON_INTERPRET=1)")
