"""Helpers for scripts/bench_fidelity.py: texts, eviction methods, teacher-forced runs, metrics.

Teacher forcing: each text's first `prompt_tokens` tokens are the prompt and the rest is forced
(SamplingParams(forced_tokens=...)). The engine reports, per forced token, log p(token) under
the model with its current (possibly compressed) KV cache and whether argmax == token.
"""
import dataclasses
import functools
import gc
import json
import math
import random
import time

from zipage import LLM, SamplingParams
from zipage.compression.config import CompressionConfig

# --------------------------------------------------------------------------------------------
# Methods

# Name -> (label, engine options). Options are flat LLM keyword arguments.
SCORED_METHODS = {
    "zipage": ("full score (global + pool + lightning, redundancy weight 0.2)",
               dict(use_global_score=True, use_pooling=True, redundancy="lightning",
                    redundancy_weight=0.2)),
    "zipage_paper": ("full score, paper weight (redundancy weight 0.8)",
                     dict(use_global_score=True, use_pooling=True, redundancy="lightning",
                          redundancy_weight=0.8)),
    "zipage_raw": ("full score, raw redundancy (global + pool + raw)",
                   dict(use_global_score=True, use_pooling=True, redundancy="raw")),
    "attn": ("attention only", {}),
    "attn_global": ("attention + global score", dict(use_global_score=True)),
    # Ablations of the full score (for investigations; not in the default table).
    "zipage_sinks": ("full score + 4 sink tokens",
                     dict(use_global_score=True, use_pooling=True, redundancy="lightning",
                          num_sink_tokens=4)),
    "global_pool": ("global + pool (no redundancy)",
                    dict(use_global_score=True, use_pooling=True)),
    "global_lightning": ("global + lightning (no pooling)",
                         dict(use_global_score=True, redundancy="lightning")),
    "zipage_rw05": ("full score, redundancy weight 0.5",
                    dict(use_global_score=True, use_pooling=True, redundancy="lightning",
                         redundancy_weight=0.5)),
}
BASELINES = {
    "recent": "recent window + sinks (StreamingLLM-like)",
    "random": "random eviction",
}
METHOD_LABELS = {**{k: v[0] for k, v in SCORED_METHODS.items()}, **BASELINES}
_KNOWN_STR_FIELDS = {"redundancy"}


def find_mode_switch(value: str):
    """The CompressionConfig field (a str option other than `redundancy`) accepting `value`.

    Lets the benchmark pick up a scoring-mode switch (e.g. `score="random"`) as soon as the
    engine grows one, without guessing its name: every str field is tried with `value` and
    must pass the config's own validation. Returns the field name or None.
    """
    for f in dataclasses.fields(CompressionConfig):
        if f.name in _KNOWN_STR_FIELDS or not isinstance(f.default, str):
            continue
        try:
            CompressionConfig(**{f.name: value})
        except (ValueError, TypeError):
            continue
        return f.name
    return None


WEIGHT_SWEEP_PREFIX = "zipage_rw="  # e.g. "zipage_rw=0.35": full score, redundancy weight 0.35


def is_method(name: str) -> bool:
    return name in METHOD_LABELS or name.startswith(WEIGHT_SWEEP_PREFIX)


def method_label(name: str) -> str:
    if name.startswith(WEIGHT_SWEEP_PREFIX):
        return f"full score, redundancy weight {name[len(WEIGHT_SWEEP_PREFIX):]}"
    return METHOD_LABELS[name]


def method_options(method: str, budget: int, window: int, sinks: int):
    """(engine options, note) for `method` at `budget`, or (None, why it is missing)."""
    if method in SCORED_METHODS:
        return dict(SCORED_METHODS[method][1]), ""
    if method.startswith(WEIGHT_SWEEP_PREFIX):
        weight = float(method[len(WEIGHT_SWEEP_PREFIX):])
        return dict(SCORED_METHODS["zipage"][1], redundancy_weight=weight), ""
    if method == "recent":
        switch = find_mode_switch("recent")
        if switch:
            return ({switch: "recent", "num_sink_tokens": sinks},
                    f"{switch}='recent', num_sink_tokens={sinks}")
        return None, ("MISSING: the engine has no recent-window switch (needs e.g. "
                      "CompressionConfig.score='recent': keep the sinks and the most recent "
                      "budget - sinks tokens)")
    if method == "random":
        switch = find_mode_switch("random")
        if switch:
            return {switch: "random"}, f"{switch}='random' (window still forced, no sinks)"
        return None, ("MISSING: the engine has no random-eviction switch (needs e.g. "
                      "CompressionConfig.score='random', uniform random scores per (layer, "
                      "request, KV head) from a seeded generator, window/sinks still forced)")
    raise ValueError(f"unknown method {method!r}; valid: {', '.join(METHOD_LABELS)}")


# --------------------------------------------------------------------------------------------
# Texts

def load_records(dataset: str, seed: int, exclude=frozenset()) -> list[dict]:
    """Dataset rows shuffled with `seed`, without those whose id is in `exclude`."""
    with open(dataset) as f:
        records = [json.loads(line) for line in f if line.strip()]
    records = [r for r in records if (r.get("id") or r.get("unique_id")) not in exclude]
    random.Random(seed).shuffle(records)
    return records


def concat_texts(tokenizer, records: list[dict], num_texts: int, num_tokens: int, source: str):
    """`num_texts` disjoint token sequences of exactly `num_tokens` tokens, each a run of
    "Problem: ... Solution: ..." records taken in order; (texts, record ids per text)."""
    texts, sources, it = [], [], iter(records)
    for _ in range(num_texts):
        parts, ids, used = [], [], []
        while len(ids) < num_tokens:
            try:
                r = next(it)
            except StopIteration:
                raise ValueError(f"{source} has too few records for {num_texts} x {num_tokens} "
                                 f"tokens") from None
            parts.append(f"Problem: {r['problem'].strip()}\nSolution: {r['solution'].strip()}\n\n")
            used.append(r.get("id") or r.get("unique_id"))
            ids = tokenizer("".join(parts), add_special_tokens=False).input_ids
        texts.append(ids[:num_tokens])
        sources.append(used)
    return texts, sources


def build_texts(tokenizer, dataset: str, num_texts: int, num_tokens: int, seed: int,
                exclude=frozenset()):
    """Texts of concatenated MATH-500 problems and their human solutions (records shuffled
    with `seed`; records whose id is in `exclude` are skipped, e.g. a tuning run's)."""
    return concat_texts(tokenizer, load_records(dataset, seed, exclude), num_texts, num_tokens,
                        dataset)


INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."


def build_generated_texts(model: str, tokenizer, dataset: str, num_texts: int, num_tokens: int,
                          seed: int, exclude=frozenset(), max_solution_tokens: int = 512):
    """Like build_texts, with the model's own solutions: each problem is asked in the chat
    template with the paper's instruction, answered by the model (Full KV, T 0.6, seeded),
    and the texts concatenate "Problem: ... Solution: <its answer>" records."""
    records = load_records(dataset, seed, exclude)
    picked = records[:max(8, num_texts * num_tokens // 150)]  # SmolLM2 records: ~300 tokens
    prompts = [tokenizer.apply_chat_template(
        [{"role": "user", "content": f"{r['problem'].strip()}\n{INSTRUCTION}"}], tokenize=False,
        add_generation_prompt=True) for r in picked]
    llm = LLM(model, device="cpu", block_size=16, max_num_seqs=len(prompts),
              kv_cache_tokens=len(prompts) * (max_solution_tokens + 640))
    outs = llm.generate(prompts, SamplingParams(temperature=0.6, seed=seed,
                                                max_tokens=max_solution_tokens), use_tqdm=False)
    del llm
    gc.collect()
    solved = [dict(r, solution=o.outputs[0].text) for r, o in zip(picked, outs) if o.outputs]
    random.Random(0).shuffle(solved)  # the order results/fidelity_smollm2_generated.* used
    return concat_texts(tokenizer, solved, num_texts, num_tokens, f"{dataset} (generated)")


# --------------------------------------------------------------------------------------------
# Engine runs

_CACHED = False


def cache_model_loading():
    """Parse the GGUF checkpoint, config and tokenizer once per process.

    LLM() spends ~20 s re-parsing the GGUF file on this CPU; every configuration builds a new
    engine (the compression settings are engine options), so the parsed state dict, HF config
    and tokenizer are memoised. load_state_dict copies the tensors into each new model, so
    engines share nothing mutable. Engine code is not modified.
    """
    global _CACHED
    if _CACHED:
        return
    import zipage.llm as zl
    import zipage.models.loader as zloader
    memo = functools.lru_cache(maxsize=None)
    zloader._checkpoint_state = memo(zloader._checkpoint_state)
    zl.load_hf_config = memo(zl.load_hf_config)
    zl.load_tokenizer = memo(zl.load_tokenizer)
    _CACHED = True


def load_tokenizer(model: str):
    """The engine's tokenizer (llm.tokenizer); builds one small engine (loading is memoised)."""
    llm = LLM(model, device="cpu", kv_cache_tokens=256, block_size=16, max_num_seqs=1)
    tok = llm.tokenizer
    del llm
    gc.collect()
    if tok is None:
        raise RuntimeError(f"{model} has no tokenizer")
    return tok


def run_config(model: str, texts, prompt_tokens: int, budget, block_size: int, options: dict):
    """One engine, all texts in one generate call. Returns per-text records and stats."""
    n = len(texts)
    longest = max(len(t) for t in texts)
    per_req = longest + 2 * block_size if budget is None else budget + 2 * block_size
    opts = dict(device="cpu", budget=budget, block_size=block_size, max_num_seqs=n,
                kv_cache_tokens=n * per_req + 4 * block_size, enable_prefix_caching=False)
    opts.update(options)
    t0 = time.perf_counter()
    llm = LLM(model, **opts)
    load_s = time.perf_counter() - t0
    params = [SamplingParams(temperature=0.0, forced_tokens=t[prompt_tokens:]) for t in texts]
    outs = llm.generate([t[:prompt_tokens] for t in texts], params, use_tqdm=False)
    stats = llm.last_stats.as_dict()
    recs = []
    for t, o in zip(texts, outs):
        if o.error:
            raise RuntimeError(f"request failed: {o.error}")
        m = o.metrics
        lp, match = m["forced_logprobs"], m["forced_greedy_match"]
        if len(lp) != len(t) - prompt_tokens or o.token_ids != t[prompt_tokens:]:
            raise RuntimeError("teacher forcing did not emit exactly the forced tokens")
        if m["num_preemptions"]:
            raise RuntimeError("a request was preempted: teacher records may be duplicated")
        recs.append(dict(logprobs=lp, match=[bool(x) for x in match],
                         argmax=m.get("forced_argmax"), num_compressions=m["num_compressions"],
                         peak_kv_tokens=m["peak_kv_tokens"]))
    del llm, outs
    gc.collect()
    return recs, dict(load_s=load_s, **stats)


# --------------------------------------------------------------------------------------------
# Metrics

def _mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def _se(xs):
    if len(xs) < 2:
        return float("nan")
    m = _mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1) / len(xs))


def summarize(recs, ref, prompt_tokens: int, ref_prompt_tokens: int, start: int = 0,
              bucket: int = 128):
    """Metrics of one configuration against the Full-KV records `ref` (same texts).

    recs[i] forces text tokens [prompt_tokens, prompt_tokens + len); ref[i] forces tokens
    from ref_prompt_tokens <= prompt_tokens on, at least as far (teacher forcing is causal,
    so Full KV's log p of a token does not depend on how far the text goes on).
    start: first text index scored (e.g. budget + block_size: only tokens predicted after the
    request's first compression could have happened).
    """
    lp, lp_ref, match, match_ref, agree, agree_id, per_text = [], [], [], [], [], [], []
    buckets: dict[int, list[float]] = {}
    for r, f in zip(recs, ref):
        n = len(r["logprobs"])
        first = max(0, start - prompt_tokens)
        off = prompt_tokens - ref_prompt_tokens
        f_lp, f_match = f["logprobs"][off:off + n], f["match"][off:off + n]
        f_arg = f["argmax"][off:off + n] if f["argmax"] is not None else None
        text_lp = r["logprobs"][first:]
        per_text.append(-_mean(text_lp))
        lp += text_lp
        lp_ref += f_lp[first:]
        match += r["match"][first:]
        match_ref += f_match[first:]
        agree += [a == b for a, b in zip(r["match"][first:], f_match[first:])]
        if r["argmax"] is not None and f_arg is not None:
            agree_id += [a == b for a, b in zip(r["argmax"][first:], f_arg[first:])]
        for i in range(first, n):
            pos = prompt_tokens + i
            buckets.setdefault(pos // bucket * bucket, []).append(f_lp[i] - r["logprobs"][i])
    diff = [y - x for x, y in zip(lp, lp_ref)]  # per-token NLL increase vs Full KV
    return dict(
        num_tokens=len(lp), first_scored=max(start, prompt_tokens), nll=-_mean(lp),
        nll_full=-_mean(lp_ref), delta_nll=_mean(diff), delta_nll_se=_se(diff),
        top1_acc=_mean(match), top1_acc_full=_mean(match_ref),
        match_agreement=_mean(agree), argmax_agreement=_mean(agree_id) if agree_id else None,
        nll_per_text=per_text,
        delta_nll_by_position={k: _mean(v) for k, v in sorted(buckets.items())},
        num_compressions=[r["num_compressions"] for r in recs],
        peak_kv_tokens=[r["peak_kv_tokens"] for r in recs])


def paired(recs_a, recs_b, prompt_tokens: int, start: int):
    """Per-token NLL difference a - b on the same tokens: mean, standard error, per text."""
    first = max(0, start - prompt_tokens)
    diff, per_text = [], []
    for a, b in zip(recs_a, recs_b):
        d = [y - x for x, y in zip(a["logprobs"][first:], b["logprobs"][first:])]
        per_text.append(_mean(d))
        diff += d
    return dict(mean=_mean(diff), se=_se(diff), per_text=per_text)


# --------------------------------------------------------------------------------------------
# Report

def cell(s, with_agreement=True):
    if s is None:
        return "missing"
    txt = f"{s['nll']:.4f} (+{s['delta_nll']:.4f})" if s["delta_nll"] >= 0 else \
        f"{s['nll']:.4f} ({s['delta_nll']:.4f})"
    if with_agreement:
        agr = s["argmax_agreement"] if s["argmax_agreement"] is not None else s["match_agreement"]
        txt += f" / {100 * agr:.1f}%"
    return txt


def markdown_table(rows, budgets, key="all"):
    """rows: list of (method, {budget: summary-or-None}) for one region key."""
    head = "| method | " + " | ".join(f"budget {b}" for b in budgets) + " |"
    sep = "|---|" + "---|" * len(budgets)
    lines = [head, sep]
    full = []
    for b in budgets:
        s = next((c[b][key] for _, c in rows if c.get(b)), None)
        full.append("missing" if s is None else f"{s['nll_full']:.4f} / 100%")
    lines.append("| Full KV (reference) | " + " | ".join(full) + " |")
    for method, cells in rows:
        lines.append(f"| {method_label(method)} | " + " | ".join(
            cell(cells.get(b, {}).get(key) if cells.get(b) else None) for b in budgets) + " |")
    return "\n".join(lines)
