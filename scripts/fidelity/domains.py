"""Fidelity per domain (issue 31): every eviction method against Full KV by teacher forcing, on
texts of several domains, each split into a tuning and a disjoint test part.

    python -m scripts.bench fidelity-domains --generations results/fidelity/long_generations.json.gz \\
        --out results/fidelity/domains --device cuda --dtype float32 --workers 8     # the H200
    python -m scripts.bench fidelity-domains ... --report-only                          # tables

Domains (each text 4,096 tokens, SmolLM2's tokenizer):
  solutions         MATH-500 problems with their human solutions, concatenated
  long_generations  SmolLM2's own long trajectories on competition problems, one per text,
                    each after its own prompt (`bench long-generations`)
  code              LiveCodeBench problem statements (title, statement, starter code),
                    concatenated
A cell is one engine run of one (method, budget) over every text of every domain and split;
it is written when it finishes and a rerun skips it. Runs at budget B take the first B tokens
as the prompt and force the rest; tokens from B + block on are scored (scripts/fidelity/stats.py).
Cells run in parallel worker processes under a wall-clock box (scripts/fidelity/timebox.py).
"""
import argparse
import json
import os
import sys
import time

from scripts.arg_types import output_stem, positive_int, time_limit
from scripts.common import invocation
from scripts.fidelity import methods as fm
from scripts.fidelity.cells import CellStore
from scripts.fidelity.domain_cells import SPLITS, cell_key, flat_texts, text_sha
from scripts.fidelity.timebox import Estimator, Task
from scripts.fidelity.timebox import run as run_tasks

DOMAINS = ("solutions", "long_generations", "code")
# Rows of the tables, in priority order: the published default first, then the variant tuned
# on SmolLM2, the comparison presets, the ablations, random (a floor) and SnapKV as published
# (it compresses only the prompt, so its memory grows as Full KV's).
METHODS = (fm.DEFAULT, "attn_recent", "streaming_llm", "h2o", "rkv", "snapkv_decode", "gkv",
           "full", "attn", "random", "snapkv")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--data-dir", default=os.environ.get("ZIPAGE_DATA_DIR"))
    p.add_argument("--generations", default="results/fidelity/long_generations.json.gz",
                   help="the long_generations domain (bench long-generations)")
    p.add_argument("--domains", nargs="+", choices=DOMAINS, default=list(DOMAINS))
    p.add_argument("--texts-per-split", type=positive_int, nargs=2, default=[8, 16],
                   metavar=("TUNING", "TEST"), help="texts of the concatenated domains")
    p.add_argument("--text-tokens", type=positive_int, default=4096)
    p.add_argument("--text-seed", type=int, default=31, help="shuffle of the domains' records")
    p.add_argument("--budgets", type=positive_int, nargs="+", default=[1024, 2048])
    p.add_argument("--block-size", type=positive_int, default=256)
    p.add_argument("--window", type=positive_int, default=16)
    p.add_argument("--methods", nargs="+", type=fm.method_arg, default=list(METHODS))
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--dtype", default="float32")
    p.add_argument("--workers", type=positive_int, default=1)
    p.add_argument("--max-wall-s", type=time_limit, default=float("inf"))
    p.add_argument("--out", type=output_stem, default="results/fidelity/domains",
                   help="output path without extension; cells in <out>_cells/")
    p.add_argument("--report-only", action="store_true")


# ---- texts ---------------------------------------------------------------------------------

def _records(path: str, to_record) -> list[dict]:
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [to_record(r) for r in rows]


def _math_record(r: dict) -> dict:
    return dict(id=r["id"], problem=r["problem"], solution=r["solution"])


def _code_record(r: dict) -> dict:
    statement = f"{r['question_title']}\n{r['question_content'].strip()}"
    if r.get("starter_code"):
        statement += f"\n{r['starter_code'].strip()}"
    return dict(id=r["question_id"], problem=statement, solution=None)


def concatenated(tokenizer, records: list[dict], seed: int, counts, num_tokens: int) -> dict:
    """Split name -> texts of `num_tokens` tokens, each a run of records (shuffled with `seed`)
    taken in order: the test texts first, then the tuning texts, so no record is in both."""
    import random
    records = list(records)
    random.Random(seed).shuffle(records)
    it, out = iter(records), {}
    for split, count in (("test", counts[1]), ("tuning", counts[0])):
        texts = []
        for _ in range(count):
            parts, ids, used = [], [], []
            while len(ids) < num_tokens:
                r = next(it)
                body = f"Problem: {r['problem'].strip()}\n"
                if r["solution"]:
                    body += f"Solution: {r['solution'].strip()}\n"
                parts.append(body + "\n")
                used.append(r["id"])
                ids = tokenizer("".join(parts), add_special_tokens=False).input_ids
            texts.append(dict(records=used, ids=ids[:num_tokens]))
        out[split] = texts
    return out


def build_texts(args) -> dict:
    """domain -> split -> [{ids, records or problem}]"""
    from scripts.fidelity.engine import load_tokenizer
    from scripts.fidelity.long_generations import load_texts
    texts = {}
    tok = None
    for domain in args.domains:
        if domain == "long_generations":
            texts[domain] = {s: [dict(problem=t["problem"], ids=t["ids"][:args.text_tokens])
                                 for t in load_texts(args.generations, s)] for s in SPLITS}
            continue
        tok = tok or load_tokenizer(args.model)
        if domain == "solutions":
            recs = _records(os.path.join(args.data_dir, "math500.jsonl"), _math_record)
        else:
            recs = _records(os.path.join(args.data_dir, "livecodebench", "livecodebench.jsonl"),
                            _code_record)
        texts[domain] = concatenated(tok, recs, args.text_seed, args.texts_per_split,
                                     args.text_tokens)
    for domain, by_split in texts.items():
        for split, ts in by_split.items():
            short = [i for i, t in enumerate(ts) if len(t["ids"]) != args.text_tokens]
            if short or not ts:
                raise SystemExit(f"{domain}/{split}: {len(ts)} texts, {len(short)} shorter than "
                                 f"{args.text_tokens} tokens")
    return texts


# ---- cells ---------------------------------------------------------------------------------

def run_cell(out: str, method: str | None, budget: int | None) -> str:
    """One engine run (a timebox task): Full KV (method None) or (method, budget)."""
    from scripts.fidelity import engine as fe
    with open(f"{out}_texts.json") as f:
        stored = json.load(f)
    s, (ids, _) = stored["settings"], flat_texts(stored["texts"])
    key = cell_key(s, method, budget)
    name = "full_kv" if method is None else f"{method}@{budget}"
    store = CellStore(f"{out}_cells")
    if store.load(name, key) is not None:
        return "cached"
    fe.cache_model_loading()
    t0 = time.perf_counter()
    options = {"observation_window": s["window"]} if method is None else key["options"]
    recs, stats = fe.run_engine(s["model"], ids, key["prompt_tokens"], budget, s["block_size"],
                                options, s["device"], s["dtype"])
    store.save(name, key, records=recs, stats=stats, seconds=time.perf_counter() - t0)
    return f"{time.perf_counter() - t0:.0f} s"


def plan(args, settings: dict, out: str) -> list[Task]:
    steps = lambda B: settings["text_tokens"] - B  # noqa: E731  (forced tokens per text)
    tasks = [Task("full_kv", "scripts.fidelity.domains:run_cell",
                  dict(out=out, method=None, budget=None), priority=0, kind="run",
                  steps=steps(min(args.budgets)))]
    for rank, m in enumerate(args.methods):
        for B in args.budgets:
            tasks.append(Task(f"{m}@{B}", "scripts.fidelity.domains:run_cell",
                              dict(out=out, method=m, budget=B), priority=1 + rank, kind="run",
                              steps=steps(B)))
    return tasks


def main(args) -> int:
    from scripts.fidelity.domain_report import write_report
    from scripts.fidelity.nll import resolve_device
    out = args.out
    args.methods = fm.expand(args.methods)
    device = resolve_device(args.device)
    texts_path = f"{out}_texts.json"
    if args.report_only:
        with open(texts_path) as f:
            stored = json.load(f)
    else:
        if not args.data_dir:
            raise SystemExit("--data-dir (or $ZIPAGE_DATA_DIR) is needed")
        texts = build_texts(args)
        ids, _ = flat_texts(texts)
        settings = dict(model=args.model, device=device, dtype=args.dtype,
                        block_size=args.block_size, window=args.window, budgets=args.budgets,
                        text_tokens=args.text_tokens, text_seed=args.text_seed,
                        texts_per_split=args.texts_per_split, text_sha=text_sha(ids),
                        generations=args.generations, methods=args.methods)
        stored = dict(settings=settings, texts=texts, command=invocation())
        if os.path.exists(texts_path):
            with open(texts_path) as f:
                old = json.load(f)["settings"]
            if old["text_sha"] != settings["text_sha"]:
                raise SystemExit(f"{texts_path} holds other texts; use another --out")
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(texts_path, "w") as f:
            json.dump(stored, f)
        n = {d: {s: len(v) for s, v in by.items()} for d, by in texts.items()}
        print(f"texts: {n}; {len(ids)} per engine run; cells in {out}_cells/", flush=True)
        outcomes = run_tasks(plan(args, settings, out), args.workers, args.max_wall_s,
                             f"{out}_logs", Estimator({"run": 0.05}, overhead_s=20.0),
                             env={"OMP_NUM_THREADS": "1"})
        for name, o in outcomes.items():
            print(f"{name:28s} {o.status:12s} {o.seconds:6.0f} s {o.detail[:80]}", flush=True)
    write_report(out, stored, args.methods)
    print(f"wrote {out}.md and {out}.json", flush=True)
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(ap)
    sys.exit(main(ap.parse_args()))
