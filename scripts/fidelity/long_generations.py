"""The model's own long reasoning as a fidelity domain (issue 31): SmolLM2's sampled
trajectories on competition problems, each kept whole (never a concatenation of short ones).

    python -m scripts.bench long-generations --out results/fidelity/long_generations   # GPU

Problems: AMC23, AIME24, AIME25 and the level-5 problems of MATH-500, asked with the harness's
prompt (chat template, the problem, the paper's boxed-answer instruction). Each is answered
`--samples` times at T 0.6 up to the model's context (8,192 tokens for SmolLM2, prompt
included). A problem contributes at most one trajectory: its first sample, by index, with at
least `--min-tokens` generated tokens. Before anything is generated, the problems are split
into a tuning part and a disjoint test part by a shuffle seeded with `--split-seed`; the texts
of a split are its kept trajectories taken in that shuffled order, the first
`--texts-per-split` (tuning, test) whose prompt + trajectory holds `--text-tokens` tokens,
each cut there. Teacher forcing then runs every text after its own prompt.

Writes <out>.json.gz (settings, the split, every trajectory's length, the texts' token ids)
and <out>.md (the command, counts and the length distribution).
"""
import argparse
import gzip
import json
import os
import random
import statistics
import time
from scripts.arg_types import count_or_zero, open_fraction, output_stem, positive_int, temperature

SOURCES = (("amc23", None), ("aime24", None), ("aime25", None), ("math500", 5))
SPLITS = ("tuning", "test")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--data-dir", default=os.environ.get("ZIPAGE_DATA_DIR"),
                   help="folder with amc23/aime24/aime25/math500.jsonl (default $ZIPAGE_DATA_DIR)")
    p.add_argument("--samples", type=positive_int, default=2, help="samples per problem")
    p.add_argument("--temperature", type=temperature, default=0.6)
    p.add_argument("--seed", type=int, default=0,
                   help="sampling seed (problem j: seed + j*samples)")
    p.add_argument("--max-model-len", type=positive_int, default=8192,
                   help="prompt + trajectory; the model's context for SmolLM2")
    p.add_argument("--min-tokens", type=count_or_zero, default=3072,
                   help="generated tokens a trajectory needs to be kept")
    p.add_argument("--text-tokens", type=positive_int, default=4096,
                   help="tokens per fidelity text (prompt + trajectory, cut here)")
    p.add_argument("--texts-per-split", type=positive_int, nargs=2, default=[12, 24],
                   metavar=("TUNING", "TEST"))
    p.add_argument("--split-seed", type=int, default=31)
    p.add_argument("--tuning-share", type=open_fraction, default=1 / 3)
    p.add_argument("--limit", type=positive_int, default=None,
                   help="first N problems of each source")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--out", type=output_stem, required=True,
                   help="output path without extension (.md and .json.gz are written)")


def load_problems(data_dir: str, limit: int | None = None) -> list[dict]:
    """Every candidate problem: {id: '<task>/<row id>', task, problem, answer}."""
    from tasks.base import get_task
    out = []
    for name, level in SOURCES:
        task = get_task(name).bind({})
        problems = task.load(data_dir)
        if level is not None:
            problems = [p for p in problems if p.meta.get("level") == level]
        for p in problems[:limit]:
            out.append(dict(id=f"{name}/{p.id}", task=name, messages=task.messages(p)))
    return out


def split_problems(ids: list[str], seed: int, tuning_share: float) -> dict[str, list[str]]:
    """Problem ids in a seeded shuffle, cut into tuning (the first share) and test."""
    order = sorted(ids)
    random.Random(seed).shuffle(order)
    cut = round(tuning_share * len(order))
    return {"tuning": order[:cut], "test": order[cut:]}


def keep_one(samples: list[list[int]], min_tokens: int) -> tuple[int, list[int]] | None:
    """(index, tokens) of the first sample with at least min_tokens tokens, else None."""
    for i, tokens in enumerate(samples):
        if len(tokens) >= min_tokens:
            return i, tokens
    return None


def select_texts(order: list[str], kept: dict, text_tokens: int, count: int) -> list[dict]:
    """The first `count` kept trajectories in `order` whose prompt + tokens reach text_tokens,
    each cut to text_tokens (prompt included)."""
    texts = []
    for pid in order:
        k = kept.get(pid)
        if k is None or len(k["prompt_ids"]) + len(k["token_ids"]) < text_tokens:
            continue
        ids = (k["prompt_ids"] + k["token_ids"])[:text_tokens]
        texts.append(dict(problem=pid, prompt_tokens=len(k["prompt_ids"]), ids=ids))
        if len(texts) == count:
            break
    return texts


def length_summary(lengths: list[int]) -> dict:
    if not lengths:
        return dict(count=0)
    q = statistics.quantiles(lengths, n=4) if len(lengths) > 1 else [lengths[0]] * 3
    return dict(count=len(lengths), mean=round(statistics.fmean(lengths), 1), min=min(lengths),
                p25=q[0], median=q[1], p75=q[2], max=max(lengths))


def generate(args, problems):
    """Per problem, its prompt ids and `--samples` sampled trajectories (token ids, finish)."""
    from zipage import LLM, SamplingParams
    llm = LLM(args.model, device=args.device, max_model_len=args.max_model_len,
              block_size=16 if args.device == "cpu" else 256,
              **({"kv_cache_tokens": 4 * args.max_model_len} if args.device == "cpu" else {}))
    tok = llm.tokenizer
    prompts = [tok.apply_chat_template(p["messages"], tokenize=False, add_generation_prompt=True)
               for p in problems]
    prompt_ids = [tok(t, add_special_tokens=False).input_ids for t in prompts]
    params = [SamplingParams(n=args.samples, temperature=args.temperature, seed=args.seed + j * args.samples,
                             max_tokens=args.max_model_len - len(ids))
              for j, ids in enumerate(prompt_ids)]
    t0 = time.perf_counter()
    outs = llm.generate(prompt_ids, params, use_tqdm=False)
    seconds = time.perf_counter() - t0
    stats = llm.last_stats.as_dict()
    llm.shutdown()
    runs = []
    for ids, out in zip(prompt_ids, outs):
        runs.append(dict(prompt_ids=ids, samples=[dict(token_ids=list(c.token_ids),
                                                       finish_reason=c.finish_reason)
                                                  for c in out.outputs]))
    return runs, dict(seconds=round(seconds, 1), output_tokens=stats.get("num_output_tokens"))


def build(args) -> dict:
    if not args.data_dir:
        raise SystemExit("--data-dir (or $ZIPAGE_DATA_DIR) is needed")
    problems = load_problems(args.data_dir, args.limit)
    split = split_problems([p["id"] for p in problems], args.split_seed, args.tuning_share)
    runs, gen = generate(args, problems)
    kept, lengths = {}, []
    for p, run in zip(problems, runs):
        lens = [len(s["token_ids"]) for s in run["samples"]]
        lengths.append(dict(problem=p["id"], prompt_tokens=len(run["prompt_ids"]), generated=lens,
                            finish=[s["finish_reason"] for s in run["samples"]]))
        one = keep_one([s["token_ids"] for s in run["samples"]], args.min_tokens)
        if one is not None:
            kept[p["id"]] = dict(sample_index=one[0], prompt_ids=run["prompt_ids"],
                                 token_ids=one[1])
    texts = {name: select_texts(split[name], kept, args.text_tokens, count)
             for name, count in zip(SPLITS, args.texts_per_split)}
    return dict(settings={k: v for k, v in vars(args).items() if k not in ("func",)},
                sources=[f"{t}" + (f" (level {lv})" if lv else "") for t, lv in SOURCES],
                split=split, generation=gen, lengths=lengths,
                kept={pid: dict(sample_index=k["sample_index"], generated=len(k["token_ids"]))
                      for pid, k in kept.items()},
                texts=texts)


def describe(result: dict, command: str) -> str:
    s, split, kept = result["settings"], result["split"], result["kept"]
    all_lens = [n for r in result["lengths"] for n in r["generated"]]
    kept_lens = [k["generated"] for k in kept.values()]
    lines = ["# SmolLM2's own long generations (fidelity domain, issue 31)", "",
             f"Command: `{command}`", "",
             f"Problems: {', '.join(result['sources'])}: {len(result['lengths'])} problems x "
             f"{s['samples']} samples at T {s['temperature']} (seed {s['seed']}), up to "
             f"{s['max_model_len']} tokens with the prompt; generation took "
             f"{result['generation']['seconds']} s for {result['generation']['output_tokens']:,} "
             f"tokens.", "",
             f"Split (seed {s['split_seed']}, fixed before generation): {len(split['tuning'])} "
             f"tuning and {len(split['test'])} test problems.", "",
             "| | count | mean | min | p25 | median | p75 | max |", "|---|---|---|---|---|---|---|---|"]
    for label, lens in (("every sample (generated tokens)", all_lens),
                        (f"kept trajectories (>= {s['min_tokens']} generated, one per problem)",
                         kept_lens)):
        d = length_summary(lens)
        lines.append(f"| {label} | {d['count']} | " + " | ".join(
            str(d.get(k, "")) for k in ("mean", "min", "p25", "median", "p75", "max")) + " |")
    finish = [f for r in result["lengths"] for f in r["finish"]]
    lines += ["", f"Finish reasons: {', '.join(f'{f} {finish.count(f)}' for f in sorted(set(finish)))}.",
              ""]
    for name in SPLITS:
        in_split = [pid for pid in split[name] if pid in kept]
        texts = result["texts"][name]
        lines.append(f"* {name}: {len(in_split)} problems kept a trajectory; {len(texts)} texts of "
                     f"{s['text_tokens']} tokens (prompt included): "
                     + ", ".join(t["problem"] for t in texts))
    return "\n".join(lines) + "\n"


def main(args) -> int:
    from scripts.common import invocation
    result = build(args)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with gzip.open(f"{args.out}.json.gz", "wt") as f:
        json.dump(result, f)
    with open(f"{args.out}.md", "w") as f:
        f.write(describe(result, invocation()))
    print(open(f"{args.out}.md").read())
    return 0


def load_texts(path: str, split: str) -> list[dict]:
    """The texts of one split of a file written by main()."""
    with gzip.open(path, "rt") as f:
        return json.load(f)["texts"][split]
