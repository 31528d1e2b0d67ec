"""Tiny random Hugging Face checkpoints of each supported architecture, for exactness tests."""
import tempfile

import torch
from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config, Qwen3Config

# Every checkpoint goes under one folder removed when the test process exits (the finalizer
# of TemporaryDirectory), so test runs leave nothing in the system's temp folder.
_CHECKPOINTS = tempfile.TemporaryDirectory(prefix="zipage-tiny-checkpoints-")

_COMMON = dict(vocab_size=384, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024)


def tiny_config(arch: str):
    if arch == "llama":
        cfg = LlamaConfig(**_COMMON, rope_theta=10000.0)
    elif arch == "qwen2":
        cfg = Qwen2Config(**_COMMON, rope_theta=10000.0)
    elif arch == "qwen3":
        cfg = Qwen3Config(**_COMMON, head_dim=16, rope_theta=1000000.0)
    else:
        raise ValueError(arch)
    cfg.architectures = [{"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                          "qwen3": "Qwen3ForCausalLM"}[arch]]
    return cfg


def tiny_checkpoint(arch: str, seed: int = 0):
    """(folder, HF model) for a random tiny model saved as safetensors."""
    torch.manual_seed(seed)
    hf = AutoModelForCausalLM.from_config(tiny_config(arch), dtype=torch.float32).eval()
    with torch.no_grad():  # bigger weights give peaked logits: no near-ties in greedy argmax
        for p in hf.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.15)
    folder = tempfile.mkdtemp(prefix=f"tiny-{arch}-", dir=_CHECKPOINTS.name)
    hf.save_pretrained(folder)
    return folder, hf


def hf_greedy(hf, prompt: list[int], max_new_tokens: int) -> list[int]:
    with torch.no_grad():
        out = hf.generate(torch.tensor([prompt]), max_new_tokens=max_new_tokens,
                          min_new_tokens=max_new_tokens, do_sample=False, pad_token_id=0)
    return out[0, len(prompt):].tolist()


def random_prompts(lengths, vocab: int, seed: int = 1) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (n,), generator=g).tolist() for n in lengths]


def forced_logprobs(llm, prompts, texts) -> torch.Tensor:
    """(len(prompts), len(text)) teacher-forced log p of each text after its prompt."""
    from zipage import SamplingParams
    params = [SamplingParams(temperature=0, forced_tokens=t) for t in texts]
    outs = llm.generate(prompts, params, use_tqdm=False)
    return torch.tensor([o.outputs[0].metrics["forced_logprobs"] for o in outs])


def add_char_tokenizer(folder: str, vocab: int = 384) -> str:
    """Give a tiny checkpoint a tokenizer: one printable character per token id (so stop
    strings and text outputs can be tested). Returns the folder."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    chars = [chr(0x21 + i) for i in range(94)] + [chr(0xC0 + i) for i in range(vocab - 94)]
    tok = Tokenizer(models.WordLevel(vocab={c: i for i, c in enumerate(chars)}, unk_token=chars[0]))
    tok.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    tok.decoder = decoders.Fuse()
    PreTrainedTokenizerFast(tokenizer_object=tok).save_pretrained(folder)
    return folder
