"""Named scoring presets: Zipage's own and the published methods it is compared with
(docs/method.md §14). Each name is also an `engine=` preset (configs/engine/<name>.yaml)."""
from dataclasses import fields

from zipage.compression.config import CompressionConfig

PRESETS = {
    "zipage": CompressionConfig,  # the default: the published Zipage score
    "zipage_paper": CompressionConfig.paper,  # the same, under the name older sweeps used
    "zipage_full": CompressionConfig.full_score,
    "zipage_attn_recent": CompressionConfig.attn_recent,  # tuned on SmolLM2 (docs/fidelity.md)
    "rkv": CompressionConfig.rkv,
    "gkv": CompressionConfig.gkv,
    "snapkv": CompressionConfig.snapkv,
    "snapkv_decode": CompressionConfig.snapkv_decode,
    "streaming_llm": CompressionConfig.streaming_llm,
    "h2o": CompressionConfig.h2o,
}
COMPARISON = ("rkv", "gkv", "snapkv", "snapkv_decode", "streaming_llm", "h2o")


def preset(name: str, **overrides) -> CompressionConfig:
    """The scoring of preset `name`; ValueError listing the valid names if unknown."""
    if name not in PRESETS:
        raise ValueError(f"unknown scoring preset {name!r}; valid: {', '.join(PRESETS)}")
    return PRESETS[name](**overrides)


def non_default(cfg: CompressionConfig) -> dict:
    """The switches of `cfg` that differ from CompressionConfig() (what a preset sets)."""
    default = CompressionConfig()
    return {f.name: getattr(cfg, f.name) for f in fields(cfg)
            if getattr(cfg, f.name) != getattr(default, f.name)}
