"""Tables of an agreement run: per (method, budget) agreement with Full KV, generated length,
truncation and accuracy; paired differences between the default and every other method."""
import json

import torch

from scripts.common import environment
from scripts.fidelity import agreement_stats as ast
from scripts.fidelity import methods as fm
from scripts.fidelity.cells import write_atomic


def answers(cell) -> dict:
    """problem id -> answers in sample order."""
    out: dict = {}
    for r in sorted(cell["rows"], key=lambda r: r["sample_index"]):
        out.setdefault(r["problem_id"], []).append(r["answer"])
    return out


def _by_sample(cell, scored) -> dict:
    return {(r["problem_id"], r["sample_index"]): r for r in cell["rows"]
            if r["problem_id"] in scored}


def cell_summary(cell, full_cell, scored) -> dict:
    rows, full_rows = _by_sample(cell, scored), _by_sample(full_cell, scored)
    keys = sorted(rows)
    return dict(agreement=ast.agreement(answers(full_cell), answers(cell), scored),
                tokens=ast.fraction([rows[k]["completion_tokens"] for k in keys]),
                extra_tokens=ast.fraction([rows[k]["completion_tokens"]
                                           - full_rows[k]["completion_tokens"] for k in keys]),
                truncated=ast.fraction([rows[k]["finish_reason"] == "length" for k in keys]),
                accuracy=ast.fraction([rows[k]["correct"] for k in keys]),
                compressions=ast.fraction([rows[k]["num_compressions"] for k in keys]))


def _pct(d, signed=False) -> str:
    return f"{100 * d['mean']:{'+' if signed else ''}.1f} ± {100 * d['se']:.1f}%"


def _num(d) -> str:
    return f"{d['mean']:+.0f} ± {d['se']:.0f}" if d["n"] > 1 else f"{d['mean']:+.0f}"


def checks(summ, args) -> list[dict]:
    """Issue 13: the default's agreement >= the recent window's at every budget (paired)."""
    out = []
    for B in args.budgets:
        a, r = summ.get((fm.DEFAULT, B)), summ.get(("recent", B))
        d = None if not (a and r) else ast.paired_difference(a["agreement"]["flags"],
                                                             r["agreement"]["flags"])
        out.append(dict(budget=B, paired=d, ok=None if d is None else d["mean"] >= 0))
    return out


def write(args, command, device, problems, cells) -> None:
    """Rewrite <out>.md and <out>.json from the finished cells (needs the Full-KV cell)."""
    full = cells.get(("full", None))
    if full is None:
        return
    full_answers = answers(full)
    scored = [p.id for p in problems if ast.majority(full_answers[p.id]) is not None]
    summ = {k: cell_summary(c, full, scored) for k, c in cells.items()}
    greedy = args.samples == 1
    word = "answer agreement" if greedy else "majority-answer agreement"
    sampling = ("greedy" if greedy else
                f"temperature {args.temperature}, {args.samples} seeded samples per problem")
    env = full.get("environment") or environment(torch.device(device))
    cell_s = sum(c.get("seconds", 0) for c in cells.values())
    skipped = f", after the first {args.skip_problems}" if args.skip_problems else ""
    md = [f"# End-to-end answer agreement with Full KV ({args.task}, {args.model})", "",
          "Command (from the repository root):", "", f"```\n{command}\n```", "",
          f"Machine: {device}, {env['platform']}, {env['cpu_count']} CPU cores (shared), torch "
          f"{env['torch']}; commit {env['zipage_commit']}. Wall time of the cells: "
          f"{cell_s / 3600:.2f} h.", "",
          f"Problems: {len(problems)} {args.task} problems (shuffle seed {args.seed}{skipped}) "
          f"with the harness's prompt; {sampling}; at most {args.max_tokens} new tokens; block size "
          f"{args.block_size}, observation window {args.window}. Answers: the harness's "
          "extraction (tasks/math_tasks.py: math-verify, boxed answer first, else the last "
          "expression); two answers agree when the extracted strings are equal. "
          f"**Scored: {len(scored)} of {len(problems)} problems**, those where Full KV's "
          f"{'answer' if greedy else 'majority answer'} exists.", "",
          f"Columns: {word} with Full KV (± SE over problems)"
          + ("" if greedy else "; per-sample agreement with Full KV's majority answer; "
             "overlap of the answer distributions (1 − total variation)")
          + "; mean generated tokens and the paired change vs Full KV (rambling shows here); "
          "samples cut at max tokens; accuracy vs the gold answer; compressions per sample.", "",
          f"| method | budget | {word} | " + ("" if greedy else "per sample | overlap | ")
          + "tokens | Δ tokens vs Full | truncated | accuracy | compressions |",
          "|---|---|---|" + ("" if greedy else "---|---|") + "---|---|---|---|---|"]
    for k in [("full", None)] + [(m, B) for B in args.budgets for m in args.methods]:
        if k not in summ:
            continue
        s, agr = summ[k], summ[k]["agreement"]
        name = "Full KV" if k[0] == "full" else fm.label(k[0])
        md.append(f"| {name} | {k[1] or '-'} | {_pct(agr['majority'])} | "
                  + ("" if greedy else f"{_pct(agr['per_sample'])} | {_pct(agr['overlap'])} | ")
                  + f"{s['tokens']['mean']:.0f} | {_num(s['extra_tokens'])} | "
                  f"{_pct(s['truncated'])} | {_pct(s['accuracy'])} | "
                  f"{s['compressions']['mean']:.1f} |")
    md += ["", f"Paired per-problem difference of {word}, default minus each method:", "",
           "| default − method | " + " | ".join(f"budget {B}" for B in args.budgets) + " |",
           "|---|" + "---|" * len(args.budgets)]
    for m in args.methods:
        if m == fm.DEFAULT:
            continue
        cells_ = []
        for B in args.budgets:
            a, o = summ.get((fm.DEFAULT, B)), summ.get((m, B))
            cells_.append("missing" if not (a and o) else _pct(ast.paired_difference(
                a["agreement"]["flags"], o["agreement"]["flags"]), signed=True))
        md.append(f"| {fm.label(m)} | " + " | ".join(cells_) + " |")
    cs = checks(summ, args)
    verdict = ("FAIL" if any(c["ok"] is False for c in cs) else
               "PASS" if all(c["ok"] for c in cs) else "INCOMPLETE")
    md += ["", f"## Issue 13 check (default agreement ≥ recent window, every budget): "
           f"**{verdict}**", ""]
    md += [f"* budget {c['budget']}: " + ("missing" if c["paired"] is None else
           f"default − recent {_pct(c['paired'], signed=True)} over {c['paired']['n']} problems: "
           f"**{'ok' if c['ok'] else 'NOT MET'}**") for c in cs]
    js = dict(command=command, args=vars(args), environment=env, cell_seconds=cell_s,
              scored_problems=scored, verdict=verdict, checks=cs,
              summaries={f"{m}@{B}": s for (m, B), s in summ.items()},
              stats={f"{m}@{B}": c["stats"] for (m, B), c in cells.items()})
    write_atomic(args.out + ".json", json.dumps(js, indent=1))
    write_atomic(args.out + ".md", "\n".join(md) + "\n")
