"""CompressionConfig validation."""
import dataclasses

import pytest

from zipage.compression import CompressionConfig


def test_default_is_the_published_zipage_score():
    # The reference's scripts/mathbench.sh (docs/method.md §6): W 16, gamma 0.8 max-decay,
    # max pool 5 at the first compression, lightning redundancy lambda 0.2 (weight 0.8),
    # T 0.4, tau 0.5, no sinks, nothing kept for recency beyond the window.
    cfg = CompressionConfig()
    published = dict(observation_window=16, use_global_score=True, global_decay=0.8,
                     global_mode="max", use_pooling=True, pooling_kernel_size=5,
                     pooling_mode="max", pool_every_compression=False, redundancy="lightning",
                     redundancy_weight=0.8, redundancy_temperature=0.4,
                     redundancy_threshold=0.5, num_sink_tokens=0, recent_ratio=0.0,
                     score="attention", score_normalization="none", compress_prompt_only=False)
    assert dataclasses.asdict(cfg) == published
    assert CompressionConfig.paper() == cfg
    assert cfg.forced_recent(2048) == 16  # the window only


def test_other_zipage_scorings():
    full = CompressionConfig.full_score()
    assert dataclasses.replace(full, redundancy_weight=0.8) == CompressionConfig()
    assert full.redundancy_weight == pytest.approx(0.2)
    tuned = CompressionConfig.attn_recent()
    assert (tuned.use_global_score, tuned.use_pooling, tuned.redundancy) == (False, False, "none")
    assert (tuned.num_sink_tokens, tuned.recent_ratio) == (4, 0.25)
    assert CompressionConfig.attention_only().pooling_size == 1
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


def test_baseline_score_modes_keep_sinks_window_and_recent_tokens():
    import torch
    from zipage.compression import CompressionBatch
    from zipage.compression.pipeline import baseline_scores
    from zipage.kernels.eviction_score import select_keep
    cfg = CompressionConfig.attention_only(observation_window=4, num_sink_tokens=2, score="recent")
    batch = CompressionBatch(slots=torch.zeros(1, dtype=torch.int32),
                             block_tables=torch.tensor([[0, 1, 2]], dtype=torch.int32),
                             target_tables=torch.tensor([[0, 1]], dtype=torch.int32),
                             phys_lens=torch.tensor([20], dtype=torch.int32),
                             window_pos=torch.arange(16, 20, dtype=torch.int32)[None],
                             num_history=torch.zeros(1, dtype=torch.int32), num_keep=8)
    keep = select_keep(baseline_scores(batch, cfg, 1, 1, 8, None), 8)[0, 0, 0]
    assert keep.nonzero().flatten().tolist() == [0, 1, 14, 15, 16, 17, 18, 19]
    rand = CompressionConfig.attention_only(observation_window=4, num_sink_tokens=2,
                                            score="random")
    keep = select_keep(baseline_scores(batch, rand, 1, 1, 8, torch.Generator().manual_seed(0)), 8)[0, 0, 0]
    kept = set(keep.nonzero().flatten().tolist())
    assert {0, 1, 16, 17, 18, 19} <= kept and len(kept) == 8 and max(kept) < 20


@pytest.mark.parametrize("bad", [
    dict(global_mode="mean"), dict(pooling_mode="min"), dict(score_normalization="sum"),
    dict(recent_ratio=1.0), dict(recent_ratio=-0.1), dict(compress_prompt_only=1),
    dict(score="recent", global_mode="sum"), dict(score="random", pooling_mode="avg"),
])
def test_bad_preset_switches_raise(bad):
    with pytest.raises(ValueError):
        CompressionConfig(**bad)


def test_preset_windows_reach_the_engine_and_conflicts_are_errors():
    from zipage.config import EngineConfig
    rkv = CompressionConfig.rkv()
    assert EngineConfig("m", budget=256, block_size=16, compression=rkv).observation_window == 8
    kw = dict(budget=256, block_size=16)
    assert EngineConfig("m", observation_window=8, **kw).compression.observation_window == 8
    assert EngineConfig("m", **kw).compression == CompressionConfig()  # default unchanged
    with pytest.raises(ValueError, match="differs"):
        EngineConfig("m", observation_window=32, compression=rkv, **kw)
    with pytest.raises(ValueError, match="recent"):  # half of 32 + 20 sinks > 32
        EngineConfig("m", budget=32, block_size=16, observation_window=4,
                     compression=CompressionConfig.h2o(num_sink_tokens=20))
    assert CompressionConfig.h2o().forced_recent(2048) == 1024
    assert CompressionConfig.rkv().forced_recent(2048) == 8
