"""Fidelity of Compressed PagedAttention by teacher forcing (SmolLM2-135M-Instruct by default).

Long texts (MATH-500 problems with human solutions, or with SmolLM2's own sampled solutions)
are forced through the engine; for every forced token it reports log p(token) and the argmax
under its current, possibly compressed, KV cache. Each (method, budget) runs all texts in one
generate call and is written to disk when it finishes (`<cells-dir>/<method>@<budget>.json`);
a rerun skips finished cells, so a crash loses at most the cell in progress. The tables
(`<out>.md`, `<out>.json`) are rewritten after every cell.

A run at budget B takes the first B tokens as its prompt (`--prompt-tokens budget`) and forces
the rest of the text: nothing is compressed before the request holds B + block tokens, so the
earlier tokens are predicted exactly as by Full KV; from there the request compresses every
block, as in a long generation. Only tokens at text index >= B + block are scored. Full KV
runs once, from the smallest prompt, as the reference of every budget (teacher forcing is
causal); `--reference transformers` computes it with one transformers forward per text
instead of one engine decode step per token (the same numbers to ~3e-5 nats; CPU time).

`python -m scripts.bench fidelity decide RESULTS.json...` applies the rule that picks the
default score (decide.py); `bench fidelity-gpu` runs many such runs in one time-boxed call
(gpu.py, docs/fidelity.md).

Usage (the exact command is written into the results file):
  python -m scripts.bench fidelity --block-size 256 --budgets 1024 2048 --num-texts 4 \\
      --text-tokens 4096 --out results/fidelity_b256_solutions
"""
import argparse
import time
from pathlib import Path

import torch

from scripts.arg_types import count_or_zero, output_stem, positive_int
from scripts.common import environment, invocation
from scripts.fidelity import engine as fe
from scripts.fidelity import group as fg
from scripts.fidelity import methods as fm
from scripts.fidelity import report as fr
from scripts.fidelity import texts as ft
from scripts.fidelity.cells import CellStore

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_METHODS = [fm.DEFAULT, "paper", "attn", "attn_global", "recent", "random"]


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--model", default="smollm2-135m", help="model name or .gguf path")
    ap.add_argument("--dataset", default=None,
                    help="JSONL (default: $ZIPAGE_DATA_DIR/math500.jsonl)")
    ap.add_argument("--text-source", choices=["solutions", "generated"], default="solutions",
                    help="solutions: MATH-500's human solutions; generated: the model's own "
                         "sampled solutions to the same problems (its reasoning style)")
    ap.add_argument("--num-texts", type=positive_int, default=4)
    ap.add_argument("--solution-tokens", type=positive_int, default=512,
                    help="--text-source generated: at most this many tokens per solution")
    ap.add_argument("--text-tokens", type=positive_int, default=4096,
                    help="tokens per text; a run at budget B forces text[B:] (with "
                         "--forced-tokens F: text[B:B+F], texts of max(B) + F tokens)")
    ap.add_argument("--forced-tokens", type=positive_int, default=None)
    ap.add_argument("--prompt-tokens", default="budget",
                    help="'budget' (prompt = first B tokens at budget B) or an int")
    ap.add_argument("--budgets", type=positive_int, nargs="+", default=[1024, 2048])
    ap.add_argument("--block-size", type=positive_int, default=256)
    ap.add_argument("--window", type=positive_int, default=16, help="observation window W")
    ap.add_argument("--sinks", type=count_or_zero, default=4,
                    help="sink tokens of the recent-window baseline")
    ap.add_argument("--methods", nargs="*", type=fm.method_arg, default=DEFAULT_METHODS,
                    help=f"any of {', '.join(fm.NAMES)}, or {fm.WEIGHT_PREFIX}<w> (full score "
                         "with redundancy weight w); none: only the texts and Full KV")
    ap.add_argument("--seed", type=int, default=0, help="shuffle of the dataset records")
    ap.add_argument("--exclude-sources", nargs="*", default=[], metavar="JSON",
                    help="results JSON of other runs (e.g. a tuning run): their records are not "
                         "used here, so tuning and test texts are disjoint")
    ap.add_argument("--reference", choices=["engine", "transformers"], default="engine",
                    help="Full-KV reference: the engine (one decode step per token) or one "
                         "transformers forward per text (fp32, CPU; much cheaper there)")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--dtype", default="auto", help="engine dtype (auto: bf16 on GPU, fp32 on CPU)")
    ap.add_argument("--threads", type=positive_int, default=1,
                    help="torch CPU threads (1: on a shared machine more threads oversubscribe)")
    ap.add_argument("--out", type=output_stem,
                    default=str(ROOT / "results/fidelity_b256_solutions"),
                    help="output path without extension (.md and .json are written)")
    ap.add_argument("--cells-dir", default=None,
                    help="finished cells (default: results/cells/<name of --out>)")
    ap.add_argument("--report-only", action="store_true",
                    help="rebuild the tables from the finished cells; run nothing")


def _texts(args, store: CellStore, device: str, tok_loader):
    key = fg.texts_key(args, device)
    n_tokens, exclude = key["num_tokens"], set(key["exclude"])

    def build():
        tok = tok_loader()
        if args.text_source == "generated":
            texts, sources = ft.build_generated_texts(args.model, tok, args.dataset,
                                                      args.num_texts, n_tokens, args.seed,
                                                      exclude, args.solution_tokens,
                                                      device=device)
        else:
            texts, sources = ft.build_texts(tok, args.dataset, args.num_texts, n_tokens,
                                            args.seed, exclude)
        return dict(texts=texts, sources=sources)

    if args.report_only:
        cell = store.load("texts", key)
        if cell is None:
            raise SystemExit(f"--report-only: no texts in {store.root}")
        return cell
    return store.get_or_run("texts", key, build)[0]


def resolve_device(name: str) -> str:
    return name if name != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")


def main(args) -> int:
    fg.finish_args(args)
    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    store = fg.store(args)
    command = getattr(args, "command_line", None) or invocation()
    fe.cache_model_loading()
    t_start = time.perf_counter()
    texts_cell = _texts(args, store, device, lambda: fe.load_tokenizer(args.model))
    texts = texts_cell["texts"]
    text_sha = fg.text_sha(texts)
    b = args.block_size
    fg.check_budgets(args, texts)
    p_full = fg.full_prompt(args)
    print(f"{len(texts)} texts x {len(texts[0])} tokens; block {b}; budgets {args.budgets}; "
          f"cells in {store.root}", flush=True)

    def run_full():
        print(f"full KV ({args.reference}, prompt {p_full}) ...", flush=True)
        t0 = time.perf_counter()
        if args.reference == "transformers":
            recs, stats = fe.run_transformers(args.model, texts, p_full)
        else:
            recs, stats = fe.run_engine(args.model, texts, p_full, None, b,
                                        dict(observation_window=args.window), device, args.dtype)
        return dict(prompt_tokens=p_full, records=recs, stats=stats,
                    seconds=time.perf_counter() - t0, environment=environment(
                        torch.device("cpu" if args.reference == "transformers" else device)))

    full_key = fg.full_key(args, text_sha, device)
    full = (store.load("full", full_key) if args.report_only
            else store.get_or_run("full", full_key, run_full)[0])
    if full is None:
        raise SystemExit(f"--report-only: no Full-KV cell in {store.root}")

    runs = {}
    for B in args.budgets:
        P = fg.prompt_len(args, B)
        sub = [t[:fg.forced_end(args, B, len(texts[0]))] for t in texts]
        for m in args.methods:
            opts = fg.method_options(args, m)
            key = fg.cell_key(args, m, B, text_sha, len(texts[0]), device)

            def run(m=m, B=B, P=P, sub=sub, opts=opts):
                t0 = time.perf_counter()
                recs, stats = fe.run_engine(args.model, sub, P, B, b, opts, device, args.dtype)
                return dict(method=m, budget=B, prompt_tokens=P, records=recs, stats=stats,
                            seconds=time.perf_counter() - t0,
                            environment=environment(torch.device(device)))

            if args.report_only:
                cell, new = store.load(f"{m}@{B}", key), False
            else:
                cell, new = store.get_or_run(f"{m}@{B}", key, run)
            if cell is None:
                continue
            runs[m, B] = cell
            if new:
                s = fr.summaries({(m, B): cell}, full, p_full, b)[m, B]
                print(f"{m}@{B}: delta NLL {s['delta_nll']:+.4f} +- {s['delta_nll_se']:.4f}, "
                      f"argmax agreement {100 * s['argmax_agreement']:.1f}%, compressions "
                      f"{s['num_compressions']}; {cell['seconds']:.0f} s", flush=True)
                fr.write(args, command, device, texts_cell, full, runs, t_start)
    fr.write(args, command, device, texts_cell, full, runs, t_start)
    print(f"wrote {args.out}.md and {args.out}.json", flush=True)
    return 0

