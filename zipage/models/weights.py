"""Fill a CausalLM (whole, or one rank's share): checkpoint tensors by Hugging Face name, or
random weights.

Each rank reads only its rows of a safetensors tensor (lazy slices). Random weights are drawn
as the whole tensor from a generator seeded by (seed, parameter name) and then sliced, so
every tensor-parallel size gets exactly the weights of the one-rank model.
"""
import zlib
from collections.abc import Iterator

import torch

from zipage.layers.linear import full_shape, load_shard
from zipage.models.decoder import CausalLM
from zipage.models.hub import ModelNotFoundError, weight_files

# Checkpoint projections that are parts of one fused parameter here: name -> (fused, part).
FUSED_PARTS = {"q_proj": ("qkv_proj", 0), "k_proj": ("qkv_proj", 1), "v_proj": ("qkv_proj", 2),
               "gate_proj": ("gate_up_proj", 0), "up_proj": ("gate_up_proj", 1)}
DUMMY_STD = 0.02  # small weights keep a deep random model finite in bf16


def param_for(checkpoint_name: str) -> tuple[str, int]:
    """Parameter and part of a checkpoint tensor: 'model.layers.0.self_attn.k_proj.weight'
    -> ('model.layers.0.self_attn.qkv_proj.weight', 1)."""
    module, _, kind = checkpoint_name.rpartition(".")
    parent, _, leaf = module.rpartition(".")
    if leaf in FUSED_PARTS:
        fused, part = FUSED_PARTS[leaf]
        return f"{parent}.{fused}.{kind}", part
    return checkpoint_name, 0


def checkpoint_name(param: str, part: int) -> str:
    """The inverse of param_for."""
    module, _, kind = param.rpartition(".")
    parent, _, leaf = module.rpartition(".")
    for name, fused in FUSED_PARTS.items():
        if fused == (leaf, part):
            return f"{parent}.{name}.{kind}"
    return param


def checkpoint_tensors(path: str, gguf: str | None) -> Iterator[tuple[str, object]]:
    """(Hugging Face name, tensor or lazy safetensors slice) of every checkpoint tensor."""
    if gguf:
        from transformers import AutoModelForCausalLM  # dequantizes GGUF tensors
        hf = AutoModelForCausalLM.from_pretrained(path, gguf_file=gguf, dtype=torch.float32)
        yield from hf.state_dict().items()
        return
    from safetensors import safe_open
    files = weight_files(path)
    if not files:
        raise ModelNotFoundError(f"no *.safetensors weights in {path}")
    for f in files:
        with safe_open(f, "pt") as st:
            for name in st.keys():
                yield name, st.get_slice(name)


def _expected_parts(model: CausalLM) -> set[tuple[str, int]]:
    return {(name, part) for name, p in model.named_parameters()
            for part in range(len(getattr(p, "tp_parts", (0,))))}


@torch.no_grad()
def load_checkpoint(model: CausalLM, tensors, source: str) -> None:
    """Copy this rank's share of every checkpoint tensor; a missing, unexpected or misshapen
    tensor is an error naming it."""
    params = dict(model.named_parameters())  # a tied LM head appears once, as the embedding
    missing, unexpected = _expected_parts(model), []
    for ckpt_name, tensor in tensors:
        if "rotary_emb" in ckpt_name or (model.spec.tie_word_embeddings
                                         and ckpt_name == "lm_head.weight"):
            continue
        name, part = param_for(ckpt_name)
        if name not in params:
            unexpected.append(ckpt_name)
            continue
        try:
            load_shard(params[name], tensor, model.tp, part)
        except ValueError as e:
            raise ValueError(f"checkpoint {source}: {ckpt_name}: {e}") from None
        missing.discard((name, part))
    if missing or unexpected:
        raise ValueError(f"checkpoint {source} does not fit {model.spec.arch}: missing "
                         f"{sorted(checkpoint_name(*m) for m in missing)[:5]}, unexpected {unexpected[:5]}")


@torch.no_grad()
def init_dummy(model: CausalLM, seed: int) -> None:
    """Random weights N(0, 0.02) for matrices and biases; norm weights stay 1."""
    for name, p in model.named_parameters():
        if p.dim() == 1 and not name.endswith(".bias"):
            continue
        g = torch.Generator(device=p.device)
        g.manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
        full = torch.empty(full_shape(p), dtype=p.dtype, device=p.device)
        full.normal_(0.0, DUMMY_STD, generator=g)
        dim = getattr(p, "tp_dim", None)
        for part, chunk in enumerate([full] if dim is None else full.split(p.tp_parts, dim)):
            load_shard(p, chunk, model.tp, part)
