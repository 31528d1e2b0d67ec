"""End-to-end answer agreement with Full KV: do compressed runs reach the same final answers?

Problems of a math task (GSM8K or MATH-500, the harness's prompts) are solved with Full KV and
with each eviction method at each budget. The final answer of every sample is extracted by the
harness's own scorer (tasks/math_tasks.py: math-verify, boxed answer first, else the last
expression); a problem agrees when its answer equals Full KV's. Greedy (`--temperature 0`, one
sample) compares single answers; with `--samples k --temperature 0.6` each problem has k
seeded samples per method (sample i uses the same seed in every method) and the tables compare
majority answers and answer distributions. Only problems where Full KV's (majority) answer
exists are scored; the report says how many. Each (method, budget) cell is written to disk
when it finishes and a rerun skips it.

Usage:
  python -m scripts.agreement --task gsm8k --num-problems 48 --block-size 16 \\
      --budgets 128 256 --max-tokens 1024 --out results/agreement_gsm8k_greedy
"""
import argparse
import gc
import json
import os
import random
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import torch

from scripts import agreement_stats as ast
from scripts import fidelity_engine as fe
from scripts import fidelity_methods as fm
from scripts.bench_common import environment
from scripts.fidelity_cells import CellStore, invocation, write_atomic
from tasks.base import get_task
from tasks.generate import build_prompt_ids, problem_seed
from zipage import LLM, SamplingParams

ROOT = Path(__file__).resolve().parents[1]


def _method(name: str) -> str:
    try:
        return fm.canonical(name)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--model", default="smollm2-135m", help="model name or .gguf path")
    ap.add_argument("--task", default="gsm8k", choices=["gsm8k", "math500"])
    ap.add_argument("--num-problems", type=int, default=48)
    ap.add_argument("--seed", type=int, default=0, help="problem shuffle and sampling seeds")
    ap.add_argument("--max-tokens", type=int, default=1024)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--samples", type=int, default=1, help="samples (seeds) per problem")
    ap.add_argument("--budgets", type=int, nargs="+", default=[128, 256])
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--window", type=int, default=16, help="observation window W")
    ap.add_argument("--sinks", type=int, default=4, help="sink tokens of the recent-window baseline")
    ap.add_argument("--methods", nargs="*", type=_method, default=[fm.DEFAULT, "paper", "recent"])
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=str(ROOT / "results/agreement_gsm8k_greedy"))
    ap.add_argument("--cells-dir", default=None)
    ap.add_argument("--report-only", action="store_true")


def load_problems(args):
    task = get_task(args.task)
    data_dir = os.environ.get("ZIPAGE_DATA_DIR") or str(ROOT.parent / "shared/datasets")
    problems = task.load(data_dir)
    random.Random(args.seed).shuffle(problems)
    return task, problems[:args.num_problems]


def run_cell(args, task, problems, prompts, budget, options, device) -> dict:
    """Generate every (problem, sample) with one engine, grade, return the cell payload."""
    n, b = args.samples, args.block_size
    longest = max(len(p) for p in prompts)
    per_req = (longest + args.max_tokens if budget is None else max(longest, budget)) + 2 * b
    t0 = time.perf_counter()
    llm = LLM(args.model, device=device, dtype=args.dtype, budget=budget, block_size=b,
              max_num_seqs=len(prompts) * n, kv_cache_tokens=len(prompts) * n * per_req + 4 * b,
              observation_window=args.window, **options)
    params = [SamplingParams(n=n, temperature=args.temperature, max_tokens=args.max_tokens,
                             seed=problem_seed(args.seed, j, n)) for j in range(len(prompts))]
    outs = llm.generate(prompts, params, use_tqdm=False)
    stats = llm.last_stats.as_dict()
    llm.shutdown()
    del llm
    gc.collect()
    rows = []
    for p, o in zip(problems, outs):
        if o.error or len(o.outputs) != n:
            raise RuntimeError(f"problem {p.id}: {o.error or 'missing samples'}")
        rows += [dict(problem_id=p.id, sample_index=c.index, completion=c.text,
                      completion_tokens=len(c.token_ids), finish_reason=c.finish_reason,
                      num_compressions=c.metrics["num_compressions"]) for c in o.outputs]
    verdicts = task.score(rows, {p.id: p for p in problems}, workers=1)
    for r, v in zip(rows, verdicts):
        r.update(answer=v["extracted_answer"], correct=v["correct"], truncated=v["truncated"])
    return dict(rows=rows, stats=stats, seconds=time.perf_counter() - t0)


def answers(cell) -> dict:
    out: dict = {}
    for r in sorted(cell["rows"], key=lambda r: r["sample_index"]):
        out.setdefault(r["problem_id"], []).append(r["answer"])
    return out


def main(args) -> int:
    torch.set_num_threads(args.threads)
    device = args.device if args.device != "auto" else (
        "cuda" if torch.cuda.is_available() else "cpu")
    name = Path(args.out).name
    store = CellStore(args.cells_dir or str(ROOT / "results/cells" / name))
    command = invocation()
    task, problems = load_problems(args)
    fe.cache_model_loading()
    tok = None if args.report_only else fe.load_tokenizer(args.model)
    cfg = SimpleNamespace(system_prompt=None, chat_template_kwargs=None)
    prompts = None if tok is None else [build_prompt_ids(tok, task, p, cfg) for p in problems]
    base_key = dict(model=args.model, task=args.task, problems=[p.id for p in problems],
                    seed=args.seed, max_tokens=args.max_tokens, temperature=args.temperature,
                    samples=args.samples, device=device, dtype=args.dtype)
    cells = {}
    plan = [("full", None)] + [(m, B) for B in args.budgets for m in args.methods]
    for m, B in plan:
        opts = {} if m == "full" else fm.options(m, args.sinks)
        key = dict(base_key, method=m, budget=B, options=opts,
                   block_size=None if B is None else args.block_size,
                   window=None if B is None else args.window)
        cell_name = "full" if B is None else f"{m}@{B}"
        if args.report_only:
            cell, new = store.load(cell_name, key), False
        else:
            cell, new = store.get_or_run(cell_name, key, lambda: run_cell(
                args, task, problems, prompts, B, opts, device))
        if cell is None:
            continue
        cells[m, B] = cell
        if new:
            toks = [r["completion_tokens"] for r in cell["rows"]]
            print(f"{cell_name}: {cell['seconds']:.0f} s, mean {sum(toks) / len(toks):.0f} tokens",
                  flush=True)
            write_report(args, command, device, problems, cells)
    if ("full", None) in cells:
        write_report(args, command, device, problems, cells)
        print(f"wrote {args.out}.md and {args.out}.json", flush=True)
    return 0


def cell_summary(cell, full_answers, scored) -> dict:
    rows = [r for r in cell["rows"] if r["problem_id"] in scored]
    return dict(agreement=ast.agreement(full_answers, answers(cell), scored),
                tokens=ast.fraction([r["completion_tokens"] for r in rows]),
                truncated=ast.fraction([r["finish_reason"] == "length" for r in rows]),
                accuracy=ast.fraction([r["correct"] for r in rows]),
                compressions=ast.fraction([r["num_compressions"] for r in rows]))


def _fmt(d, pct=False, digits=3) -> str:
    if pct:
        return f"{100 * d['mean']:.1f} ± {100 * d['se']:.1f}%"
    return f"{d['mean']:.{digits}f} ± {d['se']:.{digits}f}"


def write_report(args, command, device, problems, cells) -> None:
    full = cells.get(("full", None))
    if full is None:
        return
    full_answers = answers(full)
    scored = [p.id for p in problems if ast.majority(full_answers[p.id]) is not None]
    summ = {k: cell_summary(c, full_answers, scored) for k, c in cells.items()}
    greedy = args.samples == 1
    agree_word = "answer agreement" if greedy else "majority-answer agreement"
    env = environment(torch.device(device))
    cell_s = sum(c.get("seconds", 0) for c in cells.values())
    md = [f"# End-to-end answer agreement with Full KV ({args.task}, {args.model})", "",
          "Command (from the repository root):", "", f"```\n{command}\n```", "",
          f"Machine: {device}, {env['platform']}, {env['cpu_count']} CPU cores (shared), torch "
          f"{env['torch']}; commit {env['zipage_commit']}. Compute in the cells: "
          f"{cell_s / 3600:.2f} h.", "",
          f"Problems: {len(problems)} {args.task} problems (shuffle seed {args.seed}), the "
          f"harness's prompt; {'greedy' if greedy else f'temperature {args.temperature}, {args.samples} seeded samples each'}"
          f", max {args.max_tokens} new tokens; block size {args.block_size}, window "
          f"{args.window}. Answers: the harness's extraction (math-verify; boxed first, else "
          f"the last expression). **Scored: {len(scored)} of {len(problems)} problems** "
          f"(Full KV's {'answer' if greedy else 'majority answer'} exists).", "",
          f"Cells: {agree_word} with Full KV (± SE over problems)"
          + ("" if greedy else "; per-sample agreement with Full KV's majority; answer-"
             "distribution overlap (1 - total variation)") + "; mean generated tokens; "
          "truncated at max tokens; accuracy against the gold answer; compressions per sample.",
          "", "| method | budget | " + agree_word + (" | per sample | overlap" if not greedy else "")
          + " | tokens | truncated | accuracy | compressions |",
          "|---|---|---|" + ("---|---|" if not greedy else "") + "---|---|---|---|"]
    order = [("full", None)] + [(m, B) for B in args.budgets for m in args.methods]
    for k in order:
        if k not in summ:
            continue
        s, (m, B) = summ[k], k
        name = "Full KV" if m == "full" else fm.label(m)
        agr = s["agreement"]
        md.append(f"| {name} | {B or '-'} | {_fmt(agr['majority'], True)} | "
                  + ("" if greedy else f"{_fmt(agr['per_sample'], True)} | "
                     f"{_fmt(agr['overlap'], True)} | ")
                  + f"{s['tokens']['mean']:.0f} ± {s['tokens']['se']:.0f} | "
                  f"{_fmt(s['truncated'], True)} | {_fmt(s['accuracy'], True)} | "
                  f"{s['compressions']['mean']:.1f} |")
    checks = []
    for B in args.budgets:
        a, r = summ.get((fm.DEFAULT, B)), summ.get(("recent", B))
        if a and r:
            d = ast.paired_difference(a["agreement"]["flags"], r["agreement"]["flags"])
            checks.append(dict(budget=B, paired=d, ok=d["mean"] >= 0))
    md += ["", "## Issue 13 check: default agreement >= recent window at every budget: "
           f"**{'PASS' if checks and all(c['ok'] for c in checks) and len(checks) == len(args.budgets) else 'FAIL' if any(not c['ok'] for c in checks) else 'INCOMPLETE'}**", ""]
    md += [f"* budget {c['budget']}: default − recent {_fmt(c['paired'], True)} (paired over "
           f"{c['paired']['n']} problems): **{'ok' if c['ok'] else 'NOT MET'}**" for c in checks]
    js = dict(command=command, args=vars(args), environment=env, cell_seconds=cell_s,
              scored_problems=scored, checks=checks,
              summaries={f"{m}@{B}": s for (m, B), s in summ.items()},
              stats={f"{m}@{B}": c["stats"] for (m, B), c in cells.items()})
    write_atomic(args.out + ".json", json.dumps(js, indent=1))
    write_atomic(args.out + ".md", "\n".join(md) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(parser)
    sys.exit(main(parser.parse_args()))
