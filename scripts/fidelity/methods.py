"""Eviction methods compared by the fidelity and agreement benchmarks: name -> engine options.

`default` is whatever `CompressionConfig()` gives (what `engine=zipage` runs: the published
Zipage score), so the tables always compare the shipped default; `paper` is the same setting
under its old name. `attn_recent` is the variant tuned on SmolLM2 (engine=zipage_attn_recent:
attention + 4 sinks + the most recent quarter; the default from 2026-12-03 to 2026-12-04),
`attn` attention alone, `full` the full score at weight 0.2 (engine=zipage_full). Every method
sets every score switch, so none inherits a term of the default.
"""
import argparse

from zipage.compression.config import CompressionConfig
from zipage.compression.presets import COMPARISON, non_default, preset

DEFAULT = "default"
WEIGHT_PREFIX = "rw="  # "rw=0.35": the full score with redundancy weight 0.35
# "attn_recent=0.25": attention alone + the sinks + the most recent quarter of the kept tokens
RECENT_PREFIX = "attn_recent="
_SCORE_FIELDS = ("use_global_score", "use_pooling", "pool_every_compression", "redundancy",
                 "redundancy_weight", "num_sink_tokens", "recent_ratio", "score")


def _options(config: CompressionConfig) -> dict:
    return {name: getattr(config, name) for name in _SCORE_FIELDS}


def _full(**overrides) -> dict:
    return _options(CompressionConfig.full_score(**overrides))


def _attention(**overrides) -> dict:
    """Window attention alone, plus `overrides` (every switch explicit)."""
    return _options(CompressionConfig.attention_only(**overrides))


def _describe(config: CompressionConfig) -> str:
    terms = [t for t, on in (("global", config.use_global_score), ("pool", config.use_pooling),
                             (config.redundancy, config.redundancy != "none")) if on]
    weight = f", redundancy weight {config.redundancy_weight:g}" if config.redundancy != "none" else ""
    recency = [t for t, on in ((f"{config.num_sink_tokens} sinks", config.num_sink_tokens),
                               (f"recent {config.recent_ratio:g}", config.recent_ratio)) if on]
    text = " + ".join(terms or ["attention"]) + weight
    if recency:
        return text + " + " + " + ".join(recency)
    return text if terms else text + " only"


# name -> (label, options builder(sinks)); options are flat LLM keyword arguments.
_METHODS = {
    DEFAULT: (lambda: f"published Zipage score ({_describe(CompressionConfig())}, engine=zipage)",
              lambda sinks: _options(CompressionConfig())),
    "attn_recent": (lambda: f"tuned on SmolLM2 ({_describe(CompressionConfig.attn_recent())}, "
                            f"engine=zipage_attn_recent)",
                    lambda sinks: _options(CompressionConfig.attn_recent())),
    "full": (lambda: f"full score ({_describe(CompressionConfig.full_score())}, "
                     f"engine=zipage_full)", lambda sinks: _full()),
    "paper": (lambda: "published Zipage score (= default; engine=zipage_paper)",
              lambda sinks: _options(CompressionConfig.paper())),
    "attn": (lambda: "attention only", lambda sinks: _attention()),
    "attn_global": (lambda: "attention + global score",
                    lambda sinks: _attention(use_global_score=True)),
    "attn_sinks": (lambda: "attention only + sink tokens",
                   lambda sinks: _attention(num_sink_tokens=sinks)),
    "recent": (lambda: "recent window + sinks (StreamingLLM-like)",
               lambda sinks: _attention(score="recent", num_sink_tokens=sinks)),
    "random": (lambda: "random eviction (window kept)",
               lambda sinks: _attention(score="random")),
    # Ablations, for investigations.
    "full_raw": (lambda: "full score, raw redundancy", lambda sinks: _full(redundancy="raw")),
    "full_sinks": (lambda: "full score + sink tokens",
                   lambda sinks: dict(_full(), num_sink_tokens=sinks)),
    "global_pool": (lambda: "global + pool (no redundancy)",
                    lambda sinks: _attention(use_global_score=True, use_pooling=True)),
}
# The published methods as engine presets (docs/method.md §14), each with its own window.
_PRESET_LABELS = {"rkv": "R-KV", "gkv": "G-KV", "snapkv": "SnapKV (prompt only)",
                  "snapkv_decode": "SnapKV score at every compression",
                  "streaming_llm": "StreamingLLM (4 sinks + recent)",
                  "h2o": "H2O-style (accumulated attention + recent half)"}
for _name in COMPARISON:
    _METHODS[_name] = (lambda n=_name: f"{_PRESET_LABELS[n]} (engine={n})",
                       lambda sinks, n=_name: non_default(preset(n)))
# Names that stand for several methods (expand() replaces them).
GROUPS = {"presets": (DEFAULT, "attn_recent") + COMPARISON}
# Old names (results made before the package layout) keep working.
ALIASES = {"zipage": DEFAULT, "zipage_paper": "paper", "zipage_raw": "full_raw",
           "zipage_sinks": "full_sinks", "zipage_attn_recent": "attn_recent",
           "zipage_full": "full"}
NAMES = tuple(_METHODS)


def _number(name: str, prefix: str) -> float:
    try:
        return float(name[len(prefix):])
    except ValueError:
        raise ValueError(f"method {name!r}: expected {prefix}<number>") from None


def canonical(name: str) -> str:
    """The method's canonical name; ValueError (listing the valid ones) if unknown."""
    name = ALIASES.get(name, name)
    if name.startswith("zipage_rw="):
        name = WEIGHT_PREFIX + name[len("zipage_rw="):]
    if name.startswith(WEIGHT_PREFIX):
        weight = _number(name, WEIGHT_PREFIX)
        if not 0.0 <= weight <= 1.0:
            raise ValueError(f"redundancy weight must be in [0, 1], got {weight}")
        return f"{WEIGHT_PREFIX}{weight:g}"
    if name.startswith(RECENT_PREFIX):
        ratio = _number(name, RECENT_PREFIX)
        if not 0.0 < ratio < 1.0:
            raise ValueError(f"recent ratio must be in (0, 1), got {ratio}")
        return f"{RECENT_PREFIX}{ratio:g}"
    if name not in _METHODS:
        raise ValueError(f"unknown method {name!r}; valid: {', '.join(NAMES)}, "
                         f"{WEIGHT_PREFIX}<weight> or {RECENT_PREFIX}<ratio>")
    return name


def method_arg(name: str) -> str:
    """argparse `type=` for --methods: a group name as given, else the canonical name."""
    if name in GROUPS:
        return name
    try:
        return canonical(name)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def expand(names) -> list[str]:
    """Method names with groups ("presets") replaced by their members, duplicates dropped."""
    out = [m for n in names for m in (GROUPS.get(n) or (canonical(n),))]
    return list(dict.fromkeys(out))


def engine_options(name: str, window: int, sinks: int = 4) -> dict:
    """LLM options of a method run with the benchmark's window W, unless the method (a
    preset) defines its own."""
    return {"observation_window": window, **options(name, sinks)}


def label(name: str) -> str:
    name = canonical(name)
    if name.startswith(WEIGHT_PREFIX):
        return f"full score, redundancy weight {name[len(WEIGHT_PREFIX):]}"
    if name.startswith(RECENT_PREFIX):
        return f"attention + sinks + most recent {name[len(RECENT_PREFIX):]} of the kept"
    return _METHODS[name][0]()


def options(name: str, sinks: int = 4) -> dict:
    """Engine keyword arguments of method `name` (sinks: the recent baseline's sink tokens)."""
    name = canonical(name)
    if name.startswith(WEIGHT_PREFIX):
        return _full(redundancy_weight=float(name[len(WEIGHT_PREFIX):]))
    if name.startswith(RECENT_PREFIX):
        return _attention(num_sink_tokens=sinks, recent_ratio=float(name[len(RECENT_PREFIX):]))
    return dict(_METHODS[name][1](sinks))
