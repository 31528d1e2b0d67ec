"""compress_batch end to end: Triton vs reference, layer chunks, dispatch, validation."""
import pytest
import torch
from compression_scene import MIXED, expected_compaction, make_scene

from zipage.compression import (REFERENCE_OPS, TRITON_OPS, CompressionConfig, compress_batch,
                                score_layers)
from zipage.compression import pipeline as pipeline_mod
from zipage.kernels.eviction_score import select_keep

CFG = CompressionConfig.paper(observation_window=8, num_sink_tokens=2)


def _run(sc, cfg, ops, layer_chunk=8, profile=False):
    k, v, cache = sc.k.clone(), sc.v.clone(), sc.sc.clone()
    t = compress_batch(k, v, sc.q, cache, sc.batch, cfg, layer_chunk, profile=profile, ops=ops)
    return (k, v, cache), t


def _check(got, want):
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("red", ["lightning", "raw"])
def test_pipeline_applies_its_own_selection(triton_cpu, red):
    """Caches after compress_batch == independent compaction of score_layers' top-K."""
    cfg = CompressionConfig.paper(observation_window=8, redundancy=red)
    sc = make_scene(MIXED, L=3)
    results = {}
    for name, ops in (("triton", TRITON_OPS), ("reference", REFERENCE_OPS)):
        F, S = score_layers(sc.k, sc.q, sc.sc, sc.batch, cfg, ops)
        keep = select_keep(F, sc.batch.num_keep)
        got, _ = _run(sc, cfg, ops, layer_chunk=2)
        _check(got, expected_compaction(sc, keep, S))
        results[name] = keep
    # the two implementations agree up to float near-ties
    agree = (results["triton"] == results["reference"]).float().mean()
    assert agree > 0.99


def test_layer_chunks_do_not_matter(triton_cpu):
    sc = make_scene(MIXED, L=3)
    a, _ = _run(sc, CFG, TRITON_OPS, layer_chunk=1)
    b, _ = _run(sc, CFG, TRITON_OPS, layer_chunk=3)
    _check(a, b)


def test_plain_attention_config_leaves_score_cache(triton_cpu):
    sc = make_scene(MIXED)
    cfg = CompressionConfig.attention_only(observation_window=8)
    (k, v, cache), _ = _run(sc, cfg, None)
    _check((cache,), (sc.sc,))
    assert not torch.equal(k.nan_to_num(), sc.k.nan_to_num())


def test_cpu_dispatch_uses_reference(monkeypatch):
    sc = make_scene(MIXED)
    monkeypatch.setattr(pipeline_mod, "use_triton", lambda t: False)

    def boom(*a, **k):
        raise AssertionError("Triton op called on the CPU path")

    for name in vars(TRITON_OPS):
        monkeypatch.setattr(TRITON_OPS, name, boom)
    got, times = _run(sc, CFG, None, profile=True)
    want, _ = _run(sc, CFG, REFERENCE_OPS)
    _check(got, want)
    assert {"total", "attention_score", "redundancy", "final_score", "topk",
            "compact"} <= set(times)
    assert all(t >= 0 for t in times.values())


def test_validation():
    sc = make_scene(MIXED)
    k, v = sc.k.clone(), sc.v.clone()
    with pytest.raises(ValueError, match="window"):
        compress_batch(k, v, sc.q, sc.sc, sc.batch, CompressionConfig(observation_window=4))
    with pytest.raises(ValueError, match="score_cache"):
        compress_batch(k, v, sc.q, None, sc.batch, CFG)
    sc.batch.phys_lens = sc.batch.phys_lens.long()
    with pytest.raises(ValueError, match="int32"):
        compress_batch(k, v, sc.q, sc.sc, sc.batch, CFG)


def test_check_values_rejects_unsafe_targets():
    sc = make_scene(MIXED)
    bt = sc.batch
    bt.target_tables[1, 0] = bt.block_tables[1, 1]  # another source block: would clobber it
    with pytest.raises(ValueError, match="fresh"):
        bt.check_values(sc.b, 8)
