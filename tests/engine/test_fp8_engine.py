"""kv_cache_dtype="fp8" in the engine (CPU reference path): the pool is e4m3 plus scales and
holds ~2x the tokens per byte, teacher-forced log p stay close to the full-precision cache,
and compression keeps every kept token's value with its scale."""
import pytest
import torch

from tests.engine.tiny_models import forced_logprobs, random_prompts
from zipage import LLM, SamplingParams
from zipage.config import EngineConfig
from zipage.kernels.fp8 import FP8_DTYPE, is_v_transposed
from zipage.sim.shapes import model_spec
from zipage.worker.memory import plan_kv_pool

B = 16


def test_fp8_full_kv_is_close_to_full_precision(folder):
    prompts = random_prompts([20, 7, 40], vocab=384, seed=5)
    texts = random_prompts([60, 60, 60], vocab=384, seed=6)
    auto = LLM(folder, device="cpu", block_size=B, kv_cache_tokens=1024)
    fp8 = LLM(folder, device="cpu", block_size=B, kv_cache_tokens=1024, kv_cache_dtype="fp8")
    assert fp8.runner.kv_cache.dtype == FP8_DTYPE and auto.runner.kv_scale is None
    # FP8 V is stored transposed per block (fp8.transposed_v_view), bf16/fp32 V as K
    assert is_v_transposed(fp8.runner.v_cache) and not is_v_transposed(fp8.runner.k_cache)
    assert not is_v_transposed(auto.runner.v_cache)
    assert fp8.runner.kv_scale.shape == fp8.runner.kv_cache.shape[:-1]
    ref, got = forced_logprobs(auto, prompts, texts), forced_logprobs(fp8, prompts, texts)
    diff = (got - ref).abs()  # log p of random tokens (about -6) of a random tiny model
    assert 0 < diff.max() < 0.3 and diff.mean() < 0.05  # quantised (not identical), but close


def test_fp8_compression_moves_scales_with_values(folder):
    llm = LLM(folder, device="cpu", block_size=B, kv_cache_tokens=4096, budget=64,
              kv_cache_dtype="fp8")
    runner, compressor = llm.runner, llm.runner.compressor
    W, C = 16, 4
    original, seen = compressor.run, []

    def values(slots):  # dequantised K/V of flat slots, all layers
        kv = torch.stack([runner.k_cache.float(), runner.v_cache.float()])  # V: transposed
        kv = kv.flatten(2, 3)[:, :, slots]
        return kv * runner.kv_scale.flatten(2, 3)[:, :, slots, :, None]

    def checked_run(tasks):
        before = [values([t.old_table[p // B] * B + p % B
                          for p in range(t.phys_len - W, t.phys_len)]) for t in tasks]
        original(tasks)
        for t, window in zip(tasks, before):
            after = values([t.target_table[p // B] * B + p % B for p in range(C * B - W, C * B)])
            assert torch.equal(after, window), "kept tokens must keep their own scales"
        seen.append(len(tasks))

    compressor.run = checked_run
    base = random_prompts([40], vocab=384, seed=11)[0]
    prompts = [base + [i] for i in range(3)] + random_prompts([100], vocab=384, seed=2)
    outs = llm.generate(prompts, SamplingParams(max_tokens=150, temperature=0, ignore_eos=True),
                        use_tqdm=False)
    assert [len(o.token_ids) for o in outs] == [150] * 4 and sum(seen) > 0
    assert llm.block_manager.num_hit_tokens > 0  # prefix blocks (and their scales) shared
    assert llm.block_manager.num_free_blocks == llm.num_kv_blocks


def test_fp8_plan_holds_about_twice_the_tokens():
    spec = model_spec("qwen3-8b")
    plans = {}
    for kv in ("auto", "fp8"):
        cfg = EngineConfig(model="x", budget=2048, kv_cache_dtype=kv)
        plans[kv] = plan_kv_pool(spec, cfg, torch.bfloat16, 8192, total_bytes=140 * 2**30,
                                 non_kv_bytes=20 * 2**30)
    ratio = plans["fp8"].num_blocks / plans["auto"].num_blocks
    assert 1.9 < ratio < 2.0  # 1 byte per element plus 4-byte scales per (token, head)
    text = plans["fp8"].describe(256, 8192, 8)
    assert "fp8" in text and "1.9" in text and "fp8" not in plans["auto"].describe(256, 8192, 8)


def test_unknown_kv_cache_dtype_is_rejected():
    with pytest.raises(ValueError, match="kv_cache_dtype"):
        EngineConfig(model="x", kv_cache_dtype="int8")


def test_fp8_decode_option_is_checked():
    assert EngineConfig(model="x", kv_cache_dtype="fp8", fp8_decode="e4m3").fp8_decode == "e4m3"
    with pytest.raises(ValueError, match="fp8_decode must be 'f16' or 'e4m3'"):
        EngineConfig(model="x", kv_cache_dtype="fp8", fp8_decode="fp8")
    with pytest.raises(ValueError, match="fp8_decode applies to kv_cache_dtype='fp8' only"):
        EngineConfig(model="x", fp8_decode="e4m3")


def test_fp8_decode_e4m3_reaches_the_decode_kernel(folder, monkeypatch):
    """The option sets every layer's decode operand; on the CPU the decode then rounds q and P
    to two e4m3 terms as the kernel does (paged_decode_e4m3_reference): log p move by about
    bf16's rounding of P, not by a misread cache."""
    import zipage.layers.attention as attention
    seen = []
    real = attention.paged_decode_attention

    def spy(*args, **kwargs):
        seen.append(kwargs.get("fp8_operand"))
        return real(*args, **kwargs)
    monkeypatch.setattr(attention, "paged_decode_attention", spy)
    prompts = random_prompts([9, 4], vocab=384, seed=1)
    texts = random_prompts([40, 40], vocab=384, seed=2)
    lps = {}
    for decode in ("f16", "e4m3"):
        llm = LLM(folder, kv_cache_dtype="fp8", fp8_decode=decode, kv_cache_tokens=2048)
        lps[decode] = forced_logprobs(llm, prompts, texts)
        llm.shutdown()
    assert set(seen) == {None, torch.float8_e4m3fn}
    diff = (lps["e4m3"] - lps["f16"]).abs()
    assert 0 < diff.max() and diff.mean() < 0.01, diff
