"""Teacher-forced runs: the engine (Full KV or compressed) and a transformers reference.

Teacher forcing: each text's first `prompt_tokens` tokens are the prompt and the rest is forced
(SamplingParams(forced_tokens=...)). The engine reports, per forced token, log p(token) under
its current (possibly compressed) KV cache and the argmax token id.
"""
import functools
import gc
import time

import torch

from zipage import LLM, SamplingParams
from zipage.llm import load_engine_tokenizer


@functools.cache
def cache_model_loading() -> None:
    """Read the HF config and tokenizer once per process: every configuration builds a new
    engine (the compression settings are engine options). The weights need no memo: a GGUF
    model is read from its converted folder (zipage.models.gguf_folder), lazily. The
    tokenizer is shared read-only; engine code is not modified."""
    import zipage.llm as zl
    memo = functools.lru_cache(maxsize=None)
    zl.load_hf_config = memo(zl.load_hf_config)
    zl.load_tokenizer = memo(zl.load_tokenizer)


def warm() -> None:
    """A worker's start: memoise and parse the model once, before its first task (one small
    CPU engine, so its first timed task does not pay for the parse)."""
    torch.set_num_threads(1)
    cache_model_loading()
    import os
    llm = LLM(os.environ.get("ZIPAGE_FIDELITY_MODEL", "smollm2-135m"), device="cpu",
              kv_cache_tokens=256, block_size=16, max_num_seqs=1)
    llm.shutdown()
    del llm
    gc.collect()


def load_tokenizer(model: str):
    """The engine's tokenizer (llm.tokenizer), without loading the weights."""
    tok = load_engine_tokenizer(model, device="cpu")
    if tok is None:
        raise RuntimeError(f"{model} has no tokenizer")
    return tok


def run_engine(model: str, texts, prompt_tokens: int, budget, block_size: int, options: dict,
               device: str = "auto", dtype: str = "auto"):
    """One engine, all texts in one generate call: (per-text records, stats).

    A record holds `logprobs` and `argmax` of every forced token (text index >= prompt_tokens),
    plus the request's compression count and peak KV tokens.
    """
    n = len(texts)
    longest = max(len(t) for t in texts)
    grows = budget is None or options.get("compress_prompt_only")  # SnapKV grows as Full KV
    per_req = longest + 2 * block_size if grows else budget + 2 * block_size
    opts = dict(device=device, dtype=dtype, budget=budget, block_size=block_size,
                max_num_seqs=n, kv_cache_tokens=n * per_req + 4 * block_size,
                enable_prefix_caching=False)
    opts.update(options)
    t0 = time.perf_counter()
    llm = LLM(model, **opts)
    load_s = time.perf_counter() - t0
    params = [SamplingParams(temperature=0.0, forced_tokens=t[prompt_tokens:]) for t in texts]
    outs = llm.generate([t[:prompt_tokens] for t in texts], params, use_tqdm=False)
    stats = llm.last_stats.as_dict()
    recs = []
    for t, o in zip(texts, outs):
        if o.error or not o.outputs:
            raise RuntimeError(f"request failed: {o.error}")
        c = o.outputs[0]
        m = c.metrics
        if len(m["forced_logprobs"]) != len(t) - prompt_tokens or c.token_ids != t[prompt_tokens:]:
            raise RuntimeError("teacher forcing did not emit exactly the forced tokens")
        if m["num_preemptions"]:
            raise RuntimeError("a request was preempted: teacher records may be duplicated")
        recs.append(dict(logprobs=m["forced_logprobs"], argmax=m["forced_argmax"],
                         num_compressions=m["num_compressions"],
                         peak_kv_tokens=m["peak_kv_tokens"]))
    llm.shutdown()
    del llm, outs
    gc.collect()
    return recs, dict(load_s=load_s, **stats)


def run_transformers(model: str, texts, prompt_tokens: int, chunk: int = 512):
    """Full-KV reference from transformers: one causal forward per text, fp32, CPU.

    Teacher forcing is causal, so these are the log p and argmax the engine's Full KV run
    gives (tests/engine/test_smollm2.py: engine greedy == transformers greedy), from one
    prefill instead of one decode step per token. The head runs in `chunk`-position pieces
    (a 4096 x 49152 logit matrix is 0.8 GB).
    """
    from transformers import AutoModelForCausalLM
    from zipage.models.loader import resolve
    path, gguf = resolve(model, "auto")
    t0 = time.perf_counter()
    hf = AutoModelForCausalLM.from_pretrained(path, gguf_file=gguf, dtype=torch.float32).eval()
    load_s = time.perf_counter() - t0
    recs = []
    with torch.inference_mode():
        for t in texts:
            ids = torch.tensor([t])
            hidden = hf.model(input_ids=ids).last_hidden_state[0]
            lps, tops = [], []
            for s in range(prompt_tokens - 1, len(t) - 1, chunk):
                e = min(s + chunk, len(t) - 1)
                logp = torch.log_softmax(hf.lm_head(hidden[s:e]).float(), dim=-1)
                lps += logp.gather(1, ids[0, s + 1:e + 1, None])[:, 0].tolist()
                tops += logp.argmax(dim=-1).tolist()
            recs.append(dict(logprobs=lps, argmax=tops, num_compressions=0,
                             peak_kv_tokens=len(t)))
    del hf
    gc.collect()
    return recs, dict(load_s=load_s, wall_time_s=time.perf_counter() - t0,
                      implementation="transformers")
