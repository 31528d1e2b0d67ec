"""Issue 31: `LLM(model, budget=B)` runs the published Zipage score; the variant tuned on
SmolLM2 runs under its own name."""
import dataclasses

from zipage import LLM, SamplingParams
from zipage.compression.config import CompressionConfig
from zipage.compression.presets import preset
from zipage.config import EngineConfig

PUBLISHED = dict(use_global_score=True, global_decay=0.8, use_pooling=True, pooling_kernel_size=5,
                 pool_every_compression=False, redundancy="lightning", redundancy_weight=0.8,
                 redundancy_temperature=0.4, redundancy_threshold=0.5, num_sink_tokens=0,
                 recent_ratio=0.0)


def test_llm_with_a_budget_shows_the_published_settings():
    # LLM(...).config is EngineConfig.from_kwargs of its arguments (zipage/llm.py): the same
    # object without loading the weights
    c = EngineConfig.from_kwargs("smollm2-135m", budget=256, block_size=16).compression
    assert c == CompressionConfig.paper() and c.observation_window == 16
    assert {k: v for k, v in dataclasses.asdict(c).items() if k in PUBLISHED} == PUBLISHED


def test_the_tuned_variant_runs_under_its_name_on_the_cpu():
    llm = LLM("smollm2-135m", budget=32, block_size=16, device="cpu", kv_cache_tokens=1024,
              max_model_len=512, compression=preset("zipage_attn_recent"))
    assert llm.config.compression == CompressionConfig.attn_recent()
    out = llm.generate(["Count from one to twenty in words."],
                       SamplingParams(temperature=0, max_tokens=64, ignore_eos=True),
                       use_tqdm=False)[0].outputs[0]
    assert len(out.token_ids) == 64 and out.metrics["num_compressions"] >= 2
    assert out.metrics["peak_kv_tokens"] <= 32 + 16
    llm.shutdown()
