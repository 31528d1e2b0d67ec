"""A model too large for the host's memory fails before any weight is allocated, naming the
sizes (on a CPU machine `bench long` with the default qwen3-8b asked for 33 GB and was
killed by the OS, or swapped for minutes, instead)."""
import pytest

import zipage.models.loader as loader
from tests.engine.tiny_models import tiny_checkpoint
from zipage import LLM


def test_weights_larger_than_available_memory_fail_with_the_sizes(monkeypatch):
    path = tiny_checkpoint("qwen3")[0]
    monkeypatch.setattr(loader, "available_host_bytes", lambda: 1000)
    with pytest.raises(MemoryError, match=r"weights take 0\.\d+ GB in float32, more than the "
                                          r"0\.0 GB of memory available on this host"):
        LLM(path, device="cpu")


def test_the_preset_shape_is_counted_without_allocating_it(monkeypatch):
    monkeypatch.setattr(loader, "available_host_bytes", lambda: 10 * 10**9)
    with pytest.raises(MemoryError, match="qwen3-8b: its weights take 32.8 GB in float32"):
        LLM("qwen3-8b", load_format="dummy", device="cpu")


def test_memory_is_not_checked_where_meminfo_cannot_be_read(monkeypatch):
    path = tiny_checkpoint("qwen3")[0]
    monkeypatch.setattr(loader, "available_host_bytes", lambda: None)
    assert LLM(path, device="cpu").generate([[1, 2, 3]])[0].token_ids
