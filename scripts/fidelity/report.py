"""Tables of a fidelity run: NLL increase over Full KV per (method, budget), paired
differences between the default score and every other method, and the issue-13 checks."""
import json
import time

import torch

from scripts.common import environment
from scripts.fidelity import methods as fm
from scripts.fidelity import stats as fs
from scripts.fidelity.cells import write_atomic


def _pm(mean: float, se: float) -> str:
    return f"{mean:+.4f} ± {se:.4f}"


def summaries(runs: dict, full: dict, p_full: int, block: int) -> dict:
    """runs: (method, budget) -> cell; -> (method, budget) -> summary over text >= B + block."""
    return {(m, B): fs.summarize(c["records"], c["prompt_tokens"], full["records"], p_full,
                                 start=B + block)
            for (m, B), c in runs.items()}


def paired_vs_default(runs: dict, block: int) -> dict:
    """(method, budget) -> per-token NLL difference default - method (negative: default better)."""
    out = {}
    for (m, B), c in runs.items():
        base = runs.get((fm.DEFAULT, B))
        if m != fm.DEFAULT and base is not None:
            out[m, B] = fs.paired(base["records"], c["records"], c["prompt_tokens"], B + block)
    return out


def paired_all(runs: dict, block: int) -> dict:
    """"a|b@B" -> per-token NLL difference a - b, for every pair of methods at each budget
    (what `bench fidelity decide` compares; the cells stay on the machine)."""
    out = {}
    names = list(dict.fromkeys(m for m, _ in runs))
    for B in sorted({B for _, B in runs}):
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                if (a, B) in runs and (b, B) in runs:
                    out[f"{a}|{b}@{B}"] = fs.paired(runs[a, B]["records"], runs[b, B]["records"],
                                                    runs[a, B]["prompt_tokens"], B + block)
    return out


def acceptance(pairs: dict, budgets) -> list[dict]:
    """Issue 13: the default beats recent and random at every budget, and is not worse than
    attention only by more than one standard error."""
    checks = []
    for B in budgets:
        for other, rule in (("recent", "lower NLL"), ("random", "lower NLL"),
                            ("attn", "at most 1 SE worse")):
            p = pairs.get((other, B))
            ok = None if p is None else (p["mean"] < 0 if rule == "lower NLL"
                                         else p["mean"] <= p["se"])
            checks.append(dict(budget=B, baseline=other, rule=rule, ok=ok, paired=p))
    return checks


def verdict(checks) -> str:
    if any(c["ok"] is False for c in checks):
        return "FAIL"
    return "PASS" if all(c["ok"] for c in checks) else "INCOMPLETE"


def main_table(methods, budgets, summ) -> list[str]:
    lines = ["| method | " + " | ".join(f"budget {B}" for B in budgets) + " | mean Δ |",
             "|---|" + "---|" * (len(budgets) + 1)]
    full = [next((f"{s['nll_full']:.4f}" for (m, b), s in summ.items() if b == B), "missing")
            for B in budgets]
    lines.append("| Full KV (reference NLL) | " + " | ".join(full) + " | |")
    for m in methods:
        cells, deltas = [], []
        for B in budgets:
            s = summ.get((m, B))
            if s is None:
                cells.append("missing")
                continue
            deltas.append(s["delta_nll"])
            cells.append(f"{_pm(s['delta_nll'], s['delta_nll_se'])} / "
                         f"{100 * s['argmax_agreement']:.1f}%")
        avg = f"{fs.mean(deltas):+.4f}" if len(deltas) == len(budgets) else ""
        lines.append(f"| {fm.label(m)} | " + " | ".join(cells) + f" | {avg} |")
    return lines


def paired_table(methods, budgets, pairs) -> list[str]:
    lines = ["| default − method | " + " | ".join(f"budget {B}" for B in budgets) + " |",
             "|---|" + "---|" * len(budgets)]
    for m in methods:
        if m == fm.DEFAULT:
            continue
        cells = [_pm(pairs[m, B]["mean"], pairs[m, B]["se"]) if (m, B) in pairs else "missing"
                 for B in budgets]
        lines.append(f"| {fm.label(m)} | " + " | ".join(cells) + " |")
    return lines


def check_lines(checks) -> list[str]:
    word = {True: "ok", False: "NOT MET", None: "missing"}
    out = []
    for c in checks:
        p = c["paired"]
        detail = "" if p is None else (f": default − {c['baseline']} {_pm(p['mean'], p['se'])} "
                                       + (f"({p['mean'] / p['se']:+.1f} SE)" if p["se"] else ""))
        out.append(f"* budget {c['budget']}, vs {c['baseline']} ({c['rule']}){detail}: "
                   f"**{word[c['ok']]}**")
    return out


def write(args, command, device, texts_cell, full, runs, t_start) -> None:
    """Rewrite <out>.md and <out>.json from the finished cells."""
    b, p_full, texts = args.block_size, full["prompt_tokens"], texts_cell["texts"]
    summ = summaries(runs, full, p_full, b)
    pairs = paired_vs_default(runs, b)
    checks = acceptance(pairs, args.budgets)
    cell_s = full.get("seconds", 0) + sum(c.get("seconds", 0) for c in runs.values())
    env = next((c["environment"] for c in runs.values() if "environment" in c),
               full.get("environment")) or environment(torch.device(device))
    source = ("human solutions" if args.text_source == "solutions" else
              "SmolLM2's own solutions (chat template, the paper's instruction, T 0.6, Full KV, "
              "up to 512 tokens each)")
    md = [f"# Compression fidelity, block size {b} (teacher forcing, {args.model})", "",
          "Command (from the repository root):", "", f"```\n{command}\n```", "",
          f"Machine: {device}, {env['platform']}, {env['cpu_count']} CPU cores (shared), torch "
          f"{env['torch']}, {args.threads} thread(s); commit {env['zipage_commit']}. Wall time of "
          f"the cells: {cell_s / 3600:.2f} h (Full KV {full.get('seconds', 0) / 60:.1f} min).", "",
          f"Texts: {len(texts)} texts of {len(texts[0])} tokens, concatenated MATH-500 problems + "
          f"{source} (records shuffled with seed {args.seed}"
          + (f"; records of {', '.join(args.exclude_sources)} excluded" if args.exclude_sources
             else "") + f"). A run at budget B takes the first B tokens as its prompt and forces "
          f"the rest; it compresses every {b} tokens from B + {b} on. Scored: text positions "
          f">= B + {b}. Observation window {args.window}; the recent baseline keeps "
          f"{args.sinks} sinks. Full KV reference: {args.reference}.", "",
          "Cells: NLL increase over Full KV on the same tokens (mean ± per-token standard "
          "error) / argmax agreement with Full KV. Lower is better. 'mean Δ': mean over budgets "
          "(the weight-sweep rule).", ""]
    md += main_table(args.methods, args.budgets, summ)
    md += ["", "Paired per-token NLL difference, default score minus each method on the same "
           "tokens (negative: the default predicts the text better):", ""]
    md += paired_table(args.methods, args.budgets, pairs)
    md += ["", f"## Issue 13 checks: **{verdict(checks)}**", ""] + check_lines(checks)
    md += ["", "Compressions per text: " + "; ".join(
        f"{m}@{B} {s['num_compressions'][0]}" for (m, B), s in summ.items() if m == fm.DEFAULT),
        "", "## Methods", ""]
    for m in args.methods:
        opts = ", ".join(f"{k}={v!r}" for k, v in fm.options(m, args.sinks).items())
        md.append(f"* {fm.label(m)} (`{m}`): {opts or 'defaults'}")
    js = dict(command=command, args=vars(args), environment=env,
              text_sources=texts_cell["sources"], cell_seconds=cell_s,
              wall_seconds_this_process=time.perf_counter() - t_start,
              full=dict(stats=full["stats"], seconds=full.get("seconds")),
              verdict=verdict(checks), acceptance=checks,
              summaries={f"{m}@{B}": s for (m, B), s in summ.items()},
              paired_vs_default={f"{m}@{B}": p for (m, B), p in pairs.items()},
              paired=paired_all(runs, b),
              stats={f"{m}@{B}": c["stats"] for (m, B), c in runs.items()})
    write_atomic(args.out + ".json", json.dumps(js, indent=1))
    write_atomic(args.out + ".md", "\n".join(md) + "\n")
