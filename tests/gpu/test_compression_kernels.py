"""Compiled compression kernels on CUDA against their references, on engine-sized batches
(Qwen3-8B heads, 64 requests of 2304 tokens, budget 2048) mixing every compaction aliasing
case, and the pipeline's keep agreement. Timings: `python -m scripts.bench kernels`."""
import pytest
import torch

from tests.compression.compression_scene import make_scene
from tests.kernels.kernel_testlib import compiled_variants, cuda_kernels  # noqa: F401
from zipage.compression import REFERENCE_OPS, TRITON_OPS, CompressionConfig, score_layers
from zipage.kernels import attention_score, compact_kv, eviction_score, key_redundancy
from zipage.kernels.eviction_score import select_keep

TOKENS, BUDGET, WINDOW = 2304, 2048, 16


def engine_mix(num_requests, n, b):
    """Request kinds cycling: compressed, first compression, long prompt (partial last
    block), shared-prefix owner, and a request sharing the owner's first two blocks."""
    specs = []
    for s in range(num_requests):
        kind = ("compressed", "first", "long", "owner", "sharer")[s % 5]
        if kind == "long":
            specs.append(dict(kind="long", n=n + b + b // 3))
        elif kind == "owner":
            specs.append(dict(kind="shared", shared=2, n=n))
        elif kind == "sharer":
            specs.append(dict(kind="shared", shared=2, prefix_of=s - 1, n=n))
        else:
            specs.append(dict(kind=kind, n=n))
    return specs


@pytest.fixture(scope="module", params=[(256, torch.bfloat16, 64), (16, torch.bfloat16, 64),
                                        (16, torch.float32, 16)],
                ids=["b256-bf16", "b16-bf16", "b16-fp32"])
def scene(request):
    b, dtype, num_requests = request.param
    torch.manual_seed(0)
    sc = make_scene(engine_mix(num_requests, TOKENS, b), L=2, b=b, C=BUDGET // b, H=8, G=4,
                    D=128, W=WINDOW, M=num_requests + 3, dtype=dtype, device="cuda")
    sc.k += 0.8  # a shared direction: many key cosines near the threshold tau
    return sc


def _args(sc):
    return sc.batch.block_tables, sc.batch.phys_lens


def _assert_mostly_close(out, ref, rtol, atol, min_fraction):
    """Every element within tolerance but a few (float near-ties around tau flip a pair)."""
    close = torch.isclose(out, ref, rtol=rtol, atol=atol, equal_nan=True)
    fraction = close.float().mean().item()
    assert fraction >= min_fraction, f"{fraction:.6f} within tolerance"


def test_attention_score_matches_reference(cuda_kernels, scene):
    bt = scene.batch
    args = (scene.k, scene.q, bt.slots, *_args(scene), bt.window_pos)
    torch.testing.assert_close(TRITON_OPS.attention_score(*args),
                               REFERENCE_OPS.attention_score(*args), rtol=1e-3, atol=1e-6)


@pytest.mark.parametrize("mode", ["lightning", "raw"])
def test_redundancy_matches_reference(cuda_kernels, scene, mode):
    args = (scene.k, *_args(scene), mode == "lightning", 0.5)
    _assert_mostly_close(TRITON_OPS.redundancy(*args), REFERENCE_OPS.redundancy(*args),
                         rtol=1e-4, atol=1e-2, min_fraction=0.999)


def _final_scores(sc, ops):
    bt = sc.batch
    A = TRITON_OPS.attention_score(sc.k, sc.q, bt.slots, *_args(sc), bt.window_pos)
    rho = TRITON_OPS.redundancy(sc.k, *_args(sc), False, 0.5)
    return ops.final_score(A, rho, sc.sc, *_args(sc), bt.num_history, window=WINDOW,
                           num_sink=4, pooling_kernel_size=5, redundancy_mode="raw")


def test_final_score_matches_reference(cuda_kernels, scene):
    F, S = _final_scores(scene, TRITON_OPS)
    F_ref, S_ref = _final_scores(scene, REFERENCE_OPS)
    torch.testing.assert_close(F, F_ref, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(S, S_ref, rtol=0, atol=0)  # elementwise max: exact


def test_compaction_is_bit_exact(cuda_kernels, scene):
    F, S = _final_scores(scene, TRITON_OPS)
    keep = select_keep(F, scene.batch.num_keep)
    bt = scene.batch
    results = []
    for ops in (TRITON_OPS, REFERENCE_OPS):
        k, v, cache = scene.k.clone(), scene.v.clone(), scene.sc.clone()
        ops.compact(k, v, keep, bt.block_tables, bt.target_tables, bt.phys_lens, S, cache)
        results.append((k, v, cache))
    for got, want in zip(*results):
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


def test_pipeline_keeps_what_the_reference_keeps(cuda_kernels, scene):
    cfg = CompressionConfig.paper(observation_window=WINDOW)
    keeps = [select_keep(score_layers(scene.k, scene.q, scene.sc, scene.batch, cfg, ops)[0],
                         scene.batch.num_keep) for ops in (TRITON_OPS, REFERENCE_OPS)]
    agreement = (keeps[0] == keeps[1]).float().mean().item()
    assert agreement > 0.995, agreement


def test_one_compiled_variant_for_every_batch(cuda_kernels):
    """The number of requests compressing together and their table widths change from step
    to step: no new kernel variant may compile (the 1.7 s stall of docs/measurements.md).
    The batches below have sizes 1, 3, 16, 17 and table widths 3, 16, 8, 32."""
    kernels = [attention_score._attention_score_kernel, key_redundancy._redundancy_kernel,
               eviction_score._final_score_kernel, compact_kv._compact_kernel]
    cfg = CompressionConfig.full_score(observation_window=8)
    counts = []
    for B, tokens in ((1, 40), (3, 235), (16, 100), (17, 491)):
        sc = make_scene(engine_mix(B, tokens, 16), L=2, b=16, C=2, H=2, G=3, D=64, W=8, M=B,
                        device="cuda")
        F, S = score_layers(sc.k, sc.q, sc.sc, sc.batch, cfg, TRITON_OPS)
        TRITON_OPS.compact(sc.k, sc.v, select_keep(F, sc.batch.num_keep),
                           sc.batch.block_tables, sc.batch.target_tables, sc.batch.phys_lens,
                           S, sc.sc)
        counts.append([compiled_variants(kernel) for kernel in kernels])
    assert counts[-1] == counts[0], counts


@pytest.mark.parametrize("preset_name", ["rkv", "gkv", "snapkv_decode", "h2o"])
def test_preset_pipelines_keep_what_the_reference_keeps(cuda_kernels, scene, preset_name):
    """The comparison presets' final-score modes compiled for the GPU (docs/method.md §14)."""
    from zipage.compression.presets import preset
    cfg = preset(preset_name, observation_window=WINDOW)
    keeps = [select_keep(score_layers(scene.k, scene.q, scene.sc, scene.batch, cfg, ops)[0],
                         scene.batch.num_keep) for ops in (TRITON_OPS, REFERENCE_OPS)]
    agreement = (keeps[0] == keeps[1]).float().mean().item()
    assert agreement > 0.995, (preset_name, agreement)
