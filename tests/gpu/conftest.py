"""GPU checks: compiled Triton kernels and the engine on CUDA. Run with `pytest -m gpu tests/gpu`.

Every test here is marked `gpu` and skipped when no CUDA device is visible, so the CPU suite
collects them without running them.
"""
import pytest
import torch


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "tests/gpu" in str(item.fspath):
            item.add_marker(pytest.mark.gpu)
            if not torch.cuda.is_available():
                item.add_marker(skip)
