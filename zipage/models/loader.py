"""Build a model and tokenizer from a name, a checkpoint folder, a GGUF file, or a shape."""
import os
import warnings

import torch

from zipage.distributed.group import SINGLE, TPGroup
from zipage.models.decoder import CausalLM, Rotary
from zipage.models.gguf_folder import gguf_as_folder
from zipage.models.hub import ModelNotFoundError, hub_snapshot
from zipage.models.presets import HUB_IDS, SHAPES, smollm2_gguf_path
from zipage.models.spec import ModelSpec, spec_from_hf_config
from zipage.models.weights import checkpoint_tensors, init_dummy, load_checkpoint


def resolve(model: str, load_format: str) -> tuple[str, str | None]:
    """(local path or shape name, gguf file name or None). A GGUF file comes back as its
    converted folder (gguf_folder), or as itself where the cache cannot be written; a hub id
    as its folder in the Hugging Face cache (hub)."""
    if model == "smollm2-135m" or model.endswith(".gguf"):
        file = smollm2_gguf_path() if model == "smollm2-135m" else model
        if not os.path.isfile(file):
            raise ModelNotFoundError(f"GGUF file not found: {file}")
        folder = gguf_as_folder(file)
        if folder:
            return folder, None
        return os.path.dirname(os.path.abspath(file)), os.path.basename(file)
    if load_format == "dummy" and model in SHAPES:
        return model, None
    if os.path.isdir(model):
        if not os.path.exists(os.path.join(model, "config.json")):
            raise ModelNotFoundError(f"{model} has no config.json: not a Hugging Face checkpoint")
        return model, None
    weights = load_format != "dummy"
    if model in HUB_IDS:
        return hub_snapshot(HUB_IDS[model], weights), None
    if "/" in model and not model.startswith((".", "/")):
        return hub_snapshot(model, weights), None
    raise ModelNotFoundError(f"model not found: {model!r} is neither a folder, a .gguf file, "
                             f"nor a known name ({', '.join(['smollm2-135m', *HUB_IDS])})")


def load_hf_config(path: str, gguf: str | None):
    """A transformers PretrainedConfig. (transformers is imported here, not by the module:
    a tensor-parallel rank builds its model from a ModelSpec without it.)"""
    from transformers import AutoConfig, PretrainedConfig
    if path in SHAPES:
        shape = dict(SHAPES[path])
        return PretrainedConfig(**shape)
    return AutoConfig.from_pretrained(path, gguf_file=gguf) if gguf else AutoConfig.from_pretrained(path)


def load_tokenizer(path: str, gguf: str | None, tokenizer: str | None, vocab_size: int):
    from transformers import AutoTokenizer
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


def available_host_bytes() -> int | None:
    """MemAvailable of /proc/meminfo (Linux), None where it cannot be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class HostMemoryError(MemoryError):
    """The model's weights do not fit the host's available memory (checked before allocating)."""


def check_fits_in_host_memory(spec: ModelSpec, dtype: torch.dtype, tp: TPGroup,
                              name: str) -> None:
    """On the CPU, weights larger than the host's available memory fail here, with the sizes,
    rather than the process being killed mid-allocation (qwen3-8b is 33 GB in float32). With
    tensor parallelism on the CPU every rank's share sits on this one host."""
    available = available_host_bytes()
    if available is None:
        return
    with torch.device("meta"):
        shapes = CausalLM(spec, tp)
    need = sum(p.numel() for p in shapes.parameters()) * dtype.itemsize * tp.size
    if need > available:
        raise HostMemoryError(
            f"{name}: its weights take {need / 1e9:.1f} GB in {str(dtype).split('.')[-1]}, more "
            f"than the {available / 1e9:.1f} GB of memory available on this host. Run it on a "
            f"GPU, or pick a smaller model (the default smollm2-135m runs on the CPU; the "
            f"benchmarks take --cpu-smoke).")


def build_model(spec: ModelSpec, path: str, gguf: str | None, load_format: str,
                dtype: torch.dtype, device: torch.device, seed: int = 0,
                tp: TPGroup = SINGLE) -> CausalLM:
    """The model, or with a tensor-parallel group this rank's share of it."""
    torch.manual_seed(seed)
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # build in the target dtype: no full-precision copy
    try:
        if torch.device(device).type == "cpu":
            check_fits_in_host_memory(spec, dtype, tp, gguf or path)
        with torch.device(device):
            model = CausalLM(spec, tp)
    finally:
        torch.set_default_dtype(default_dtype)
    if load_format == "dummy":
        init_dummy(model, seed)
    else:
        load_checkpoint(model, checkpoint_tensors(path, gguf), path)
    with torch.device(device):
        model.rotary = Rotary(spec)  # RoPE tables stay float32 whatever the model dtype
    return model.eval()


def spec_for(path: str, gguf: str | None) -> ModelSpec:
    return spec_from_hf_config(load_hf_config(path, gguf))
