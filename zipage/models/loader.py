"""Build a model and tokenizer from a name, a checkpoint folder, a GGUF file, or a shape."""
import glob
import os
import warnings

import torch
from transformers import AutoConfig, AutoTokenizer, PretrainedConfig

from zipage.models.decoder import CausalLM, Rotary, fuse_checkpoint_state
from zipage.models.presets import HUB_IDS, SHAPES, smollm2_gguf_path
from zipage.models.spec import ModelSpec, spec_from_hf_config


def resolve(model: str, load_format: str) -> tuple[str, str | None]:
    """(path or hub id, gguf file name or None)."""
    if model == "smollm2-135m":
        path = smollm2_gguf_path()
        return os.path.dirname(path), os.path.basename(path)
    if model.endswith(".gguf"):
        if not os.path.isfile(model):
            raise FileNotFoundError(f"GGUF file not found: {model}")
        return os.path.dirname(os.path.abspath(model)), os.path.basename(model)
    if load_format == "dummy" and model in SHAPES:
        return model, None
    if os.path.isdir(model):
        if not os.path.exists(os.path.join(model, "config.json")):
            raise FileNotFoundError(f"{model} has no config.json: not a Hugging Face checkpoint")
        return model, None
    if model in HUB_IDS:
        return HUB_IDS[model], None
    if "/" in model and not model.startswith((".", "/")):
        return model, None  # a hub id; transformers reports a failure to fetch it
    raise FileNotFoundError(f"model not found: {model!r} is neither a folder, a .gguf file, "
                            f"nor a known name ({', '.join(['smollm2-135m', *HUB_IDS])})")


def load_hf_config(path: str, gguf: str | None) -> PretrainedConfig:
    if path in SHAPES:
        shape = dict(SHAPES[path])
        return PretrainedConfig(**shape)
    return AutoConfig.from_pretrained(path, gguf_file=gguf) if gguf else AutoConfig.from_pretrained(path)


def load_tokenizer(path: str, gguf: str | None, tokenizer: str | None, vocab_size: int):
    source = tokenizer or path
    if source in SHAPES:
        return None
    try:
        tok = AutoTokenizer.from_pretrained(source, gguf_file=gguf) if gguf and not tokenizer \
            else AutoTokenizer.from_pretrained(source)
    except (OSError, ValueError) as e:
        warnings.warn(f"no tokenizer at {source} ({e.__class__.__name__}); prompts must be token ids")
        return None
    if len(tok) < vocab_size // 2:  # transformers 5 builds an empty tokenizer when files are missing
        warnings.warn(f"tokenizer at {source} has {len(tok)} tokens for a {vocab_size}-token model: "
                      f"ignored; prompts must be token ids")
        return None
    return tok


def _checkpoint_state(path: str, gguf: str | None) -> dict[str, torch.Tensor]:
    if gguf:
        from transformers import AutoModelForCausalLM  # dequantizes GGUF tensors
        hf = AutoModelForCausalLM.from_pretrained(path, gguf_file=gguf, dtype=torch.float32)
        return hf.state_dict()
    from safetensors import safe_open
    files = sorted(glob.glob(os.path.join(path, "*.safetensors")))
    if not files:
        raise FileNotFoundError(f"no *.safetensors weights in {path}")
    state = {}
    for f in files:
        with safe_open(f, "pt") as st:
            for name in st.keys():
                state[name] = st.get_tensor(name)
    return state


def build_model(spec: ModelSpec, path: str, gguf: str | None, load_format: str,
                dtype: torch.dtype, device: torch.device, seed: int = 0) -> CausalLM:
    torch.manual_seed(seed)
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # build in the target dtype: no full-precision copy
    try:
        with torch.device(device):
            model = CausalLM(spec)
    finally:
        torch.set_default_dtype(default_dtype)
    if load_format == "dummy":
        for p in model.parameters():  # small weights keep a deep random model finite in bf16
            if p.dim() > 1:
                p.data.normal_(0.0, 0.02)
    else:
        state = _checkpoint_state(path, gguf)
        state = fuse_checkpoint_state({k: v for k, v in state.items() if "rotary_emb" not in k})
        if spec.tie_word_embeddings:
            state.pop("lm_head.weight", None)
        missing, unexpected = model.load_state_dict(state, strict=False)
        missing = [k for k in missing if not (spec.tie_word_embeddings and k == "lm_head.weight")]
        if missing or unexpected:
            raise ValueError(f"checkpoint {path} does not fit {spec.arch}: "
                             f"missing {missing[:5]}, unexpected {unexpected[:5]}")
    with torch.device(device):
        model.rotary = Rotary(spec)  # RoPE tables stay float32 whatever the model dtype
    return model.eval()


def spec_for(path: str, gguf: str | None) -> ModelSpec:
    return spec_from_hf_config(load_hf_config(path, gguf))
