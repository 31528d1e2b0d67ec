"""The Hugging Face transformers baseline of `throughput`: the same workload through
`model.generate` (left-padded batches, exactly output_len new tokens each)."""
import time

import torch

from scripts.common import sync
from zipage.models.presets import SHAPES


def hf_config_for(model: str):
    from transformers import AutoConfig
    if model in SHAPES:
        shape = dict(SHAPES[model])
        return AutoConfig.for_model(shape.pop("model_type"), **shape)
    return AutoConfig.from_pretrained(model)


def left_pad(prompts: list[list[int]], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(map(len, prompts))
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.int64)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1
    return ids.to(device), mask.to(device)


def build_hf_model(hf_config, checkpoint: str | None, dtype, device):
    """Random weights built directly on the device; or the checkpoint's weights if given."""
    from transformers import AutoModelForCausalLM
    if checkpoint is not None:
        return AutoModelForCausalLM.from_pretrained(checkpoint, dtype=dtype).to(device).eval()
    with torch.device(device):
        return AutoModelForCausalLM.from_config(hf_config, dtype=dtype).eval()


@torch.inference_mode()
def hf_generate(model, prompts, output_len: int, batch_size: int, temperature: float,
                seed: int, device) -> tuple[float, int, list[list[int]]]:
    """Timed HF generate over batches of left-padded prompts, exactly output_len new tokens
    each (min_new_tokens = max_new_tokens: EOS ignored). Returns (seconds, tokens, outputs)."""
    sampling = (dict(do_sample=True, temperature=temperature, top_k=0, top_p=1.0)
                if temperature > 0 else dict(do_sample=False))
    total, n_out, outputs = 0.0, 0, []
    for i in range(0, len(prompts), batch_size):
        ids, mask = left_pad(prompts[i:i + batch_size], 0, device)
        torch.manual_seed(seed + i)
        sync(device)
        t0 = time.perf_counter()
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=output_len,
                             min_new_tokens=output_len, pad_token_id=0, **sampling)
        sync(device)
        total += time.perf_counter() - t0
        new = out[:, ids.shape[1]:]
        n_out += new.numel()
        outputs += new.tolist()
    return total, n_out, outputs
