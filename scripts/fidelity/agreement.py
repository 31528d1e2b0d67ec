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
  python -m scripts.bench agreement --task gsm8k --num-problems 48 --block-size 16 \\
      --budgets 128 256 --max-tokens 1024 --out results/agreement_gsm8k_greedy
"""
import argparse
import gc
import os
import random
import time
from pathlib import Path
from types import SimpleNamespace

import torch

from scripts.arg_types import count_or_zero, output_stem, positive_int, temperature
from scripts.common import environment, invocation
from scripts.fidelity import agreement_report as ar
from scripts.fidelity import engine as fe
from scripts.fidelity import methods as fm
from scripts.fidelity.cells import CellStore
from tasks.base import get_task
from tasks.generate import build_prompt_ids, problem_seed
from zipage import LLM, SamplingParams

ROOT = Path(__file__).resolve().parents[2]


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--model", default="smollm2-135m", help="model name or .gguf path")
    ap.add_argument("--task", default="gsm8k", choices=["gsm8k", "math500"])
    ap.add_argument("--num-problems", type=positive_int, default=48)
    ap.add_argument("--seed", type=int, default=0, help="problem shuffle and sampling seeds")
    ap.add_argument("--skip-problems", type=count_or_zero, default=0,
                    help="start after this many shuffled problems (a split disjoint from a "
                         "run without it, e.g. for tuning)")
    ap.add_argument("--max-tokens", type=positive_int, default=1024)
    ap.add_argument("--temperature", type=temperature, default=0.0)
    ap.add_argument("--samples", type=positive_int, default=1, help="samples (seeds) per problem")
    ap.add_argument("--budgets", type=positive_int, nargs="+", default=[128, 256])
    ap.add_argument("--block-size", type=positive_int, default=16)
    ap.add_argument("--window", type=positive_int, default=16, help="observation window W")
    ap.add_argument("--sinks", type=count_or_zero, default=4,
                    help="sink tokens of the recent-window baseline")
    ap.add_argument("--methods", nargs="*", type=fm.method_arg, default=[fm.DEFAULT, "paper", "recent"])
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--threads", type=positive_int, default=1)
    ap.add_argument("--out", type=output_stem, default=str(ROOT / "results/agreement_gsm8k_greedy"),
                    help="output path without extension (.md and .json are written)")
    ap.add_argument("--cells-dir", default=None)
    ap.add_argument("--report-only", action="store_true",
                    help="grade and tabulate the finished cells; generate nothing")
    ap.add_argument("--no-grade", action="store_true",
                    help="generate only (e.g. on a GPU machine without math-verify); grade "
                         "later with --report-only (same flags)")


def load_problems(args):
    task = get_task(args.task)
    data_dir = os.environ.get("ZIPAGE_DATA_DIR") or str(ROOT.parent / "shared/datasets")
    problems = task.load(data_dir)
    random.Random(args.seed).shuffle(problems)
    start = args.skip_problems
    if not 0 <= start < len(problems):
        raise SystemExit(f"--skip-problems {start}: {args.task} has {len(problems)} problems")
    return task, problems[start:start + args.num_problems]


def sampling_params(args, num_prompts: int) -> list:
    n = args.samples
    return [SamplingParams(n=n, temperature=args.temperature, max_tokens=args.max_tokens,
                           seed=problem_seed(args.seed, j, n)) for j in range(num_prompts)]


def rows_of(problems, outs, n: int) -> list[dict]:
    """The cell's rows (ungraded) from the engine's outputs, one per sample."""
    rows = []
    for p, o in zip(problems, outs, strict=True):
        if o.error or len(o.outputs) != n:
            raise RuntimeError(f"problem {p.id}: {o.error or 'missing samples'}")
        rows += [dict(problem_id=p.id, sample_index=c.index, completion=c.text,
                      completion_tokens=len(c.token_ids), finish_reason=c.finish_reason,
                      num_compressions=c.metrics["num_compressions"]) for c in o.outputs]
    return rows


def kv_tokens_per_request(args, prompts, budget, options) -> int:
    longest = max(len(p) for p in prompts)
    b = args.block_size
    grows = budget is None or options.get("compress_prompt_only")  # SnapKV grows as Full KV
    return (longest + args.max_tokens if grows else max(longest, budget)) + 2 * b


def run_cell(args, task, problems, prompts, budget, options, device) -> dict:
    """Generate every (problem, sample) with one engine; the cell payload (ungraded)."""
    n, b = args.samples, args.block_size
    per_req = kv_tokens_per_request(args, prompts, budget, options)
    t0 = time.perf_counter()
    llm = LLM(args.model, device=device, dtype=args.dtype, budget=budget, block_size=b,
              max_num_seqs=len(prompts) * n, kv_cache_tokens=len(prompts) * n * per_req + 4 * b,
              **{"observation_window": args.window, **options})  # a preset's own W wins
    outs = llm.generate(prompts, sampling_params(args, len(prompts)), use_tqdm=False)
    stats = llm.last_stats.as_dict()
    llm.shutdown()
    del llm
    gc.collect()
    return dict(rows=rows_of(problems, outs, n), stats=stats, seconds=time.perf_counter() - t0,
                environment=environment(torch.device(device)))


def build_prompts(args, task, problems, tok) -> list[list[int]]:
    cfg = SimpleNamespace(system_prompt=None, chat_template_kwargs=None)
    return [build_prompt_ids(tok, task, p, cfg) for p in problems]


def cell_key(args, problems, method: str, budget, device: str) -> dict:
    opts = {} if method == "full" else fm.options(method, args.sinks)
    return dict(model=args.model, task=args.task, problems=[p.id for p in problems],
                seed=args.seed, max_tokens=args.max_tokens, temperature=args.temperature,
                samples=args.samples, device=device, dtype=args.dtype, method=method,
                budget=budget, options=opts,
                block_size=None if budget is None else args.block_size,
                window=None if budget is None else args.window)


def store(args) -> CellStore:
    return CellStore(args.cells_dir or str(ROOT / "results/cells" / Path(args.out).name))


def grade(task, problems, cell) -> None:
    """Add the harness's verdict (extracted answer, correct) to every row of the cell."""
    verdicts = task.score(cell["rows"], {p.id: p for p in problems}, workers=1)
    for r, v in zip(cell["rows"], verdicts):
        r.update(answer=v["extracted_answer"], correct=v["correct"], truncated=v["truncated"])


def main(args) -> int:
    args.methods = fm.expand(args.methods)
    torch.set_num_threads(args.threads)
    device = args.device if args.device != "auto" else (
        "cuda" if torch.cuda.is_available() else "cpu")
    store_ = store(args)
    command = invocation()
    task, problems = load_problems(args)
    fe.cache_model_loading()
    tok = None if args.report_only else fe.load_tokenizer(args.model)
    prompts = None if tok is None else build_prompts(args, task, problems, tok)
    cells = {}
    plan = [("full", None)] + [(m, B) for B in args.budgets for m in args.methods]
    for m, B in plan:
        opts = {} if m == "full" else fm.options(m, args.sinks)
        key = cell_key(args, problems, m, B, device)
        cell_name = "full" if B is None else f"{m}@{B}"
        if args.report_only:
            cell, new = store_.load(cell_name, key), False
        else:
            cell, new = store_.get_or_run(cell_name, key, lambda: run_cell(
                args, task, problems, prompts, B, opts, device))
        if cell is None:
            continue
        if not args.no_grade and any("answer" not in r for r in cell["rows"]):
            grade(task, problems, cell)
            store_.save(cell_name, **cell)
        cells[m, B] = cell
        if new and not args.no_grade:
            toks = [r["completion_tokens"] for r in cell["rows"]]
            print(f"{cell_name}: {cell['seconds']:.0f} s, mean {sum(toks) / len(toks):.0f} tokens",
                  flush=True)
            ar.write(args, command, device, problems, cells)
    if ("full", None) in cells and not args.no_grade:
        ar.write(args, command, device, problems, cells)
        print(f"wrote {args.out}.md and {args.out}.json", flush=True)
    return 0

