"""Fidelity of Compressed PagedAttention on the real SmolLM2-135M-Instruct (CPU), by teacher forcing.

Long texts (concatenated MATH-500 problems + solutions) are split into a short prompt (the
first --prompt-tokens tokens) and a forced continuation. Every configuration (Full KV, then
each eviction method at each budget) runs all texts in one generate call; the engine reports
log p and argmax==token for every forced token under its current, possibly compressed, cache.

Metrics per (method, budget), over every forced token of every text ("all") and over the
tokens predicted after the first compression could have happened ("post": text index >=
budget + block_size):
  NLL        -mean log p(forced token)         (delta = NLL - NLL of Full KV on the same tokens)
  agreement  fraction of positions where "argmax == text token" is the same as under Full KV
             (the engine exposes only that flag; if it also reports `forced_argmax`, true
             argmax agreement with Full KV is used instead and labelled so)
  top-1      fraction of positions where argmax == text token (in the JSON)

Usage (the command that made results/fidelity_smollm2.md is written into it):
  python scripts/bench_fidelity.py --num-texts 4 --text-tokens 2048 --budgets 128 256 512 1024
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import torch  # noqa: E402

import fidelity_lib as fl  # noqa: E402

DEFAULT_METHODS = ["zipage", "attn", "attn_global", "recent", "random"]


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--dataset", default=str(ROOT.parent / "shared/datasets/math500.jsonl"))
    ap.add_argument("--num-texts", type=int, default=4)
    ap.add_argument("--text-tokens", type=int, default=2048, help="tokens per text (prompt included)")
    ap.add_argument("--prompt-tokens", type=int, default=32)
    ap.add_argument("--budgets", type=int, nargs="+", default=[128, 256, 512, 1024])
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--window", type=int, default=16, help="observation window W")
    ap.add_argument("--sinks", type=int, default=4, help="sink tokens of the recent-window baseline")
    ap.add_argument("--methods", nargs="+", default=DEFAULT_METHODS,
                    choices=list(fl.METHOD_LABELS))
    ap.add_argument("--seed", type=int, default=0, help="shuffle of the dataset records")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch CPU threads (1: the machine is shared; 2 threads on 2 busy cores "
                         "oversubscribe OpenMP and run ~20x slower)")
    ap.add_argument("--out", default=str(ROOT / "results/fidelity_smollm2"),
                    help="output path without extension (.md and .json are written)")
    return ap.parse_args()


def environment():
    def run(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=20,
                                  check=True).stdout.strip()
        except Exception:
            return None
    commit = run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"])
    dirty = run(["git", "-C", str(ROOT), "status", "--porcelain"])
    return dict(python=platform.python_version(), torch=torch.__version__,
                platform=platform.platform(), cpu_count=os.cpu_count(),
                torch_threads=torch.get_num_threads(),
                zipage_commit=f"{commit}{'+dirty' if dirty else ''}" if commit else None,
                loadavg=os.getloadavg())


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    command = "python " + " ".join([os.path.relpath(sys.argv[0], ROOT), *sys.argv[1:]])
    fl.cache_model_loading()
    t_start = time.perf_counter()
    from zipage.models.loader import load_tokenizer, resolve
    tok = load_tokenizer(*resolve(args.model, "auto"), None)
    texts, sources = fl.build_texts(tok, args.dataset, args.num_texts, args.text_tokens, args.seed)
    P, b = args.prompt_tokens, args.block_size
    print(f"{len(texts)} texts x {args.text_tokens} tokens (prompt {P}, forced "
          f"{args.text_tokens - P}); budgets {args.budgets}; block {b}; W {args.window}",
          flush=True)

    runs = {}  # "method@budget" -> run info

    def save_partial():
        Path(args.out + ".json").parent.mkdir(parents=True, exist_ok=True)
        with open(args.out + ".partial.json", "w") as f:
            json.dump(dict(command=command, runs=runs), f)

    base = dict(observation_window=args.window)
    print("full KV ...", flush=True)
    ref, stats = fl.run_config(args.model, texts, P, None, b, base)
    print(f"  done in {stats['wall_time_s']:.0f} s (load {stats['load_s']:.1f} s)", flush=True)
    full_all = fl.summarize(ref, ref, P)
    runs["full"] = dict(method="full", budget=None, options={}, stats=stats,
                        summary={"all": full_all})

    table = {}  # method -> {budget: {"all": s, "post": s} or None}
    for budget in args.budgets:
        for method in args.methods:
            options, note = fl.method_options(method, budget, args.window, args.sinks)
            key = f"{method}@{budget}"
            if options is None:
                print(f"{key}: {note}", flush=True)
                table.setdefault(method, {})[budget] = None
                runs[key] = dict(method=method, budget=budget, missing=note)
                continue
            opts = {**base, **options}
            t0 = time.perf_counter()
            recs, stats = fl.run_config(args.model, texts, P, budget, b, opts)
            summ = {"all": fl.summarize(recs, ref, P),
                    "post": fl.summarize(recs, ref, P, start=budget + b)}
            table.setdefault(method, {})[budget] = summ
            runs[key] = dict(method=method, budget=budget, options=opts, note=note, stats=stats,
                             summary=summ)
            s = summ["all"]
            print(f"{key}: NLL {s['nll']:.4f} (delta {s['delta_nll']:+.4f} +- "
                  f"{s['delta_nll_se']:.4f}), agreement {100 * s['match_agreement']:.1f}%, "
                  f"top-1 {100 * s['top1_acc']:.1f}%; compressions "
                  f"{s['num_compressions']}, peak KV {s['peak_kv_tokens']}; "
                  f"{time.perf_counter() - t0:.0f} s (compression "
                  f"{stats['compression_time_s']:.1f} s)", flush=True)
            save_partial()
    total_s = time.perf_counter() - t_start

    # Acceptance: the full score beats recent-window and random eviction at every budget.
    checks = []
    for budget in args.budgets:
        z = table.get("zipage", {}).get(budget)
        for base_m in ("recent", "random"):
            o = table.get(base_m, {}).get(budget)
            if z is None or o is None:
                checks.append((budget, base_m, None))
                continue
            checks.append((budget, base_m, z["all"]["nll"] < o["all"]["nll"]))
    verdict = ("PASS" if all(c[2] for c in checks) else
               "FAIL" if any(c[2] is False for c in checks) else "INCOMPLETE")

    rows = [(m, table[m]) for m in args.methods]
    agr_kind = ("argmax agreement" if full_all["argmax_agreement"] is not None
                else "match-flag agreement")
    md = [
        "# Compression fidelity on SmolLM2-135M-Instruct (teacher forcing, CPU)",
        "",
        "Command (from the repository root):",
        "",
        f"```\n{command}\n```",
        "",
        f"Texts: {len(texts)} x {args.text_tokens} tokens of concatenated MATH-500 problems + "
        f"solutions (records shuffled with seed {args.seed}); prompt = first {P} tokens, the "
        f"remaining {args.text_tokens - P} tokens of each text are forced "
        f"({len(texts) * (args.text_tokens - P)} scored tokens). Block size {b}, observation "
        f"window {args.window}, recent-window baseline with {args.sinks} sink tokens. "
        f"Full-KV NLL {full_all['nll']:.4f}, Full-KV top-1 accuracy "
        f"{100 * full_all['top1_acc']:.1f}%.",
        "",
        f"Cells: NLL (delta vs Full KV on the same tokens) / {agr_kind} with Full KV.",
        "Agreement = fraction of forced positions where the compressed run's "
        "`argmax == text token` flag equals Full KV's (the engine exposes only that flag).",
        "",
        "## All forced tokens",
        "",
        fl.markdown_table(rows, args.budgets, "all"),
        "",
        "## Tokens after the first compression (text index >= budget + block size)",
        "",
        fl.markdown_table(rows, args.budgets, "post"),
        "",
        "## Methods",
        "",
    ]
    for m in args.methods:
        opts, note = fl.method_options(m, args.budgets[0], args.window, args.sinks)
        desc = note or ", ".join(f"{k}={v!r}" for k, v in (opts or {}).items()) or "defaults"
        md.append(f"* {fl.METHOD_LABELS[m]} (`{m}`): {desc}")
    md += ["", f"## Acceptance (full score NLL < recent-window and < random, every budget): "
           f"**{verdict}**", ""]
    for budget, base_m, ok in checks:
        z = table.get("zipage", {}).get(budget)
        o = table.get(base_m, {}).get(budget)
        zs = f"{z['all']['nll']:.4f}" if z else "missing"
        os_ = f"{o['all']['nll']:.4f}" if o else "missing"
        md.append(f"* budget {budget}: full score {zs} vs {base_m} {os_}: "
                  f"{'ok' if ok else 'NOT MET' if ok is False else 'missing'}")
    md += ["", f"Runtime: {total_s / 60:.1f} min on {os.cpu_count()} CPU cores, "
           f"{args.threads} torch thread(s).", ""]
    md_text = "\n".join(md)

    out = dict(command=command, args=vars(args), environment=environment(),
               text_sources=sources, runtime_s=total_s, verdict=verdict,
               acceptance=[dict(budget=b_, baseline=m, ok=ok) for b_, m, ok in checks],
               runs=runs)
    Path(args.out + ".json").parent.mkdir(parents=True, exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump(out, f, indent=1)
    with open(args.out + ".md", "w") as f:
        f.write(md_text)
    if os.path.exists(args.out + ".partial.json"):
        os.remove(args.out + ".partial.json")
    print()
    print(md_text)


if __name__ == "__main__":
    main()
