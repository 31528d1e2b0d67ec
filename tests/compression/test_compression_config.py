"""CompressionConfig validation."""
import dataclasses

import pytest

from zipage.compression import CompressionConfig


def test_defaults_and_paper():
    cfg = CompressionConfig()
    assert cfg.redundancy == "none" and not cfg.use_global_score and cfg.pooling_size == 1
    paper = CompressionConfig.paper()
    assert paper.use_global_score and paper.redundancy == "lightning"
    assert paper.pooling_size == 5 and paper.redundancy_weight == pytest.approx(0.8)
    assert CompressionConfig(use_pooling=True, pooling_kernel_size=7).pooling_size == 7


@pytest.mark.parametrize("bad", [
    dict(observation_window=0), dict(pooling_kernel_size=4), dict(pooling_kernel_size=0),
    dict(redundancy="fast"), dict(redundancy_weight=1.5), dict(global_decay=-0.1),
    dict(redundancy_temperature=0.0), dict(redundancy_threshold=2.0),
    dict(num_sink_tokens=-1), dict(use_pooling=1), dict(observation_window=8.0),
])
def test_bad_values_raise(bad):
    with pytest.raises(ValueError):
        CompressionConfig(**bad)


def test_unknown_key_and_frozen():
    with pytest.raises(TypeError):
        CompressionConfig(use_similarity=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        CompressionConfig().redundancy = "raw"
