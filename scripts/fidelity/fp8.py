"""FP8 KV cache fidelity by teacher forcing (SmolLM2-135M, CPU): NLL of each KV storage vs
the full-precision cache, for Full KV and for Zipage (default score) at some budgets.

Storage variants ("kv"):
  auto          the model dtype (fp32 on CPU): the reference of every cell
  fp8           the engine's kv_cache_dtype="fp8": e4m3, a float32 scale per (token, KV head),
                q and k Hadamard-rotated (fp8_key_rotation); fp8_unrotated: the same without;
                fp8_e4m3: the same with fp8_decode="e4m3" (decode rounds q and P to two e4m3
                terms, as the e4m3-MMA kernel does; Full KV cells, one prefill, equal fp8's)
  tensor1       simulated: e4m3 with one static scale 1.0 (vLLM's default without calibration)
  layer_calib   simulated: e4m3 with a static scale per (layer, K or V) = amax / 448 over a
                calibration text disjoint from the scored ones (vLLM-style calibrated scales)
  head_calib    simulated: as layer_calib, one scale per (layer, KV head, K or V)
  bf16          simulated: K/V rounded to bfloat16 (a bf16 model's cache, as on the GPU); with
                a budget, how far any rounding of K/V moves Zipage through its eviction choices
  fp8_k, fp8_v  simulated: K alone (or V alone) through the engine's e4m3 with its scale per
                (token, KV head); V enters no eviction score, so with a budget fp8_v is the
                kept values' cost alone and fp8_k the logits' and eviction choices'
  fp8_rot       simulated: as fp8_unrotated, with K rounded in a Hadamard-rotated basis (q and
                k both rotated leave q.k unchanged: the engine's fp8); fp8_k_rot: K alone
Simulated variants quantise-dequantise K/V in the model-dtype cache at the write (the
engine's KV write is wrapped); nothing else changes. Texts: MATH-500 problems + solutions
(texts.py). Full KV cells run one engine prefill per text and score every
position >= --score-from (teacher forcing is causal and prefill attention reads K/V back from
the cache, so these are the log p of teacher-forced decoding, for one forward). A Zipage
cell at budget B has the first B tokens as prompt and forces the rest through decode steps
(compressing every block, as in a long generation); it is scored on positions >= B + block.
Budget cells run --budget-variants (auto and fp8 by default).

  python -m scripts.bench fp8-fidelity --num-texts 4 --text-tokens 1536 --out results/fp8_full
  python -m scripts.bench fp8-fidelity --num-texts 2 --text-tokens 1024 --block-size 64 \\
      --full-variants --budgets 256 --out results/fp8_zipage_256
"""
import argparse
import json
import math
import os
import time
from pathlib import Path

import torch

import zipage.layers.attention as attention_mod
from scripts.arg_types import count_or_zero, positive_int
from scripts.common import invocation
from scripts.fidelity import engine as fe
from scripts.fidelity import methods as fm
from scripts.fidelity import texts as ft
from scripts.fidelity.fp8_stores import ROUNDED, RoundedStore, SimulatedStore
from zipage.kernels.fp8 import FP8_MAX

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = ("auto", "fp8", "tensor1", "layer_calib", "head_calib", "bf16", "fp8_k", "fp8_v",
            "fp8_rot", "fp8_k_rot", "fp8_unrotated", "fp8_e4m3")


def _calibrate(model, text, num_layers, block, device):
    sim = SimulatedStore(num_layers)
    attention_mod.store_kv = sim
    try:
        fe.run_engine(model, [text], len(text) - 1, None, block, {}, device)
    finally:
        attention_mod.store_kv = sim.original
    return sim.amax / FP8_MAX  # (2, L, H)


def _prefill_logprobs(args, texts, opts):
    """log p(text[i]) for i >= 1 of every text, from one Full-KV engine prefill each."""
    from zipage import LLM
    from zipage.layers.attention import AttentionMetadata
    n = max(len(t) for t in texts)
    llm = LLM(args.model, device=args.device, block_size=args.block_size, max_num_seqs=1,
              kv_cache_tokens=n + args.block_size, enable_prefix_caching=False, **opts)
    runner, out = llm.runner, []
    i32 = dict(dtype=torch.int32, device=runner.device)
    with torch.inference_mode():
        for t in texts:
            ids = torch.tensor(t, device=runner.device)
            meta = AttentionMetadata(
                slot_mapping=torch.arange(len(t), device=runner.device), num_decode=0,
                prefill_block_tables=torch.arange(-(-len(t) // args.block_size), **i32)[None],
                prefill_cu_seqlens_q=torch.tensor([0, len(t)], **i32),
                prefill_context_lens=torch.tensor([len(t)], **i32), prefill_max_q_len=len(t))
            hidden = runner.model(ids, torch.arange(len(t), device=runner.device), meta)
            lps = []
            for s in range(0, len(t) - 1, 256):
                e = min(s + 256, len(t) - 1)
                logp = torch.log_softmax(runner.model.logits(hidden[s:e]).float(), -1)
                lps += logp.gather(1, ids[s + 1:e + 1, None])[:, 0].tolist()
            out.append(lps)
    llm.shutdown()
    return out


def _run(args, texts, kv, budget, scales, num_layers):
    opts = fm.options(fm.DEFAULT, args.sinks) if budget else {}
    sim = None
    if kv in ("fp8", "fp8_unrotated", "fp8_e4m3"):
        opts = dict(opts, kv_cache_dtype="fp8", fp8_key_rotation=kv != "fp8_unrotated",
                    fp8_decode="e4m3" if kv == "fp8_e4m3" else "f16")
    elif kv in ROUNDED:
        sim = RoundedStore(*ROUNDED[kv])
        attention_mod.store_kv = sim
    elif kv != "auto":
        s = {"tensor1": torch.ones(2, num_layers), "layer_calib": scales.amax(-1),
             "head_calib": scales}[kv]
        sim = SimulatedStore(num_layers, s)
        attention_mod.store_kv = sim
    try:
        if budget is None:  # log p of text[1:]: position i + 1 at index i
            return _prefill_logprobs(args, texts, opts), 1
        recs, _ = fe.run_engine(args.model, texts, budget, budget, args.block_size, opts,
                                args.device)
    finally:
        if sim is not None:
            attention_mod.store_kv = sim.original
    return [r["logprobs"] for r in recs], budget


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--num-texts", type=positive_int, default=4)
    ap.add_argument("--text-tokens", type=positive_int, default=2048)
    ap.add_argument("--block-size", type=positive_int, default=64)
    ap.add_argument("--budgets", type=positive_int, nargs="*", default=[256, 512])
    ap.add_argument("--full-variants", nargs="*", default=list(VARIANTS[:5]), choices=VARIANTS)
    ap.add_argument("--budget-variants", nargs="+", default=["auto", "fp8"], choices=VARIANTS,
                    help="storage variants of the budget cells; auto (their reference) first")
    ap.add_argument("--score-from", type=count_or_zero, default=64,
                    help="first scored position (Full KV)")
    ap.add_argument("--sinks", type=count_or_zero, default=4)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default=str(ROOT / "results/fp8_fidelity"),
                    help="writes OUT.json (per-token NLL of every cell) and OUT.md (the table)")


def main(args) -> int:
    if args.budgets and args.budget_variants[0] != "auto":
        raise SystemExit("--budget-variants: auto (the reference of every budget cell) first")
    if set(args.budget_variants) & {"layer_calib", "head_calib"}:
        raise SystemExit("--budget-variants: the calibrated variants are Full KV only")
    torch.set_num_threads(1)
    fe.cache_model_loading()
    tok = fe.load_tokenizer(args.model)
    data = os.path.join(os.environ.get("ZIPAGE_DATA_DIR", str(ROOT.parent / "shared/datasets")),
                        "math500.jsonl")
    texts, _ = ft.build_texts(tok, data, args.num_texts + 1, args.text_tokens, args.seed)
    calib, texts = texts[0], texts[1:]  # calibration text is never scored
    from zipage.models.loader import load_hf_config, resolve
    from zipage.models.spec import spec_from_hf_config
    num_layers = spec_from_hf_config(load_hf_config(*resolve(args.model, "auto"))).num_layers
    scales = None
    if any(kv.endswith("_calib") for kv in args.full_variants):
        scales = _calibrate(args.model, calib, num_layers, args.block_size, args.device)
    cells = [(kv, None) for kv in args.full_variants]
    cells += [(kv, b) for b in args.budgets for kv in args.budget_variants]
    results, out = {}, Path(args.out)
    for kv, budget in cells:
        t0 = time.perf_counter()
        lps, first = _run(args, texts, kv, budget, scales, num_layers)
        score_from = budget + args.block_size if budget else args.score_from
        nll = [-x for t in lps for x in t[score_from - first:]]
        key = f"{kv}@{budget or 'full'}"
        results[key] = dict(nll=nll, minutes=(time.perf_counter() - t0) / 60)
        print(f"{key}: NLL {sum(nll) / len(nll):.5f} over {len(nll)} tokens "
              f"({results[key]['minutes']:.1f} min)", flush=True)
        args_ = {k: v for k, v in vars(args).items() if k != "subcommand"}  # as before `bench`
        out.with_suffix(".json").write_text(json.dumps(dict(args=args_, cells=results)))
    _report(args, results, out)


def _delta(results, a, b):
    """mean and standard error of the paired per-token NLL difference a - b."""
    d = [x - y for x, y in zip(results[a]["nll"], results[b]["nll"])]
    m = sum(d) / len(d)
    se = math.sqrt(sum((x - m) ** 2 for x in d) / (len(d) - 1) / len(d))
    return m, se


def _report(args, results, out):
    lines = [f"# FP8 KV cache fidelity ({args.model}, teacher forcing, CPU)", "",
             f"`{invocation()}`", "",
             f"{args.num_texts} MATH-500 texts x {args.text_tokens} tokens, block "
             f"{args.block_size}; Full KV scored from position {args.score_from}, budget B "
             f"from B + {args.block_size}. Delta: paired per-token NLL difference vs the "
             f"full-precision (fp32) cache of the same cell, nats/token, ± standard error.",
             "", "| cell | NLL | Delta vs auto | minutes |", "|---|---|---|---|"]
    for key, r in results.items():
        kv, b = key.split("@")
        base = f"auto@{b}"
        nll = sum(r["nll"]) / len(r["nll"])
        delta = "" if kv == "auto" else "{:+.5f} ± {:.5f}".format(*_delta(results, key, base))
        lines.append(f"| {key} | {nll:.5f} ({len(r['nll'])} tokens) | {delta} | "
                     f"{r['minutes']:.1f} |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))

