"""Which scoring should `engine=zipage` use? A stated rule applied to fidelity results.

  python -m scripts.bench fidelity decide RESULTS.json... [--tuning T.json...] [--block-size 256]

The rule (issue 13; it prints its inputs, changes no code or config):
1. Only results at `--block-size` (default 256, the paper's) count. Results named `*tuning*`
   (or given with --tuning) select; the others (test texts, disjoint from the tuning texts)
   report. Without tuning results the test results select, and the output says so.
2. Candidates: the full score at every redundancy weight run (default, paper, rw=<w>),
   attention only, attention + global, global + pool. A candidate's score is its mean NLL
   increase over Full KV over every (selecting result, budget); one missing cell drops it.
3. The lowest score wins, unless a simpler candidate is within one standard error of it: the
   difference's SE is that of the paired per-token difference (its per-budget SEs combined as
   independent), the unpaired one when a result has no pair. Among the tied candidates the
   simplest wins (attention only < + global < + pool < full score at any weight); among equal
   ones the current default, then the lower score.
4. The chosen score is then checked on the test results, at every budget: it must beat recent
   window + sinks and random (paired mean < 0) and be at most one SE worse than attention only.
   If it fails, the output says so and lists the candidates that pass; if none passes, the
   choice is to be made by end-to-end answer agreement (--agreement: graded agreement reports).
"""
import argparse
import json
import math
import sys
from pathlib import Path

from scripts.arg_types import positive_int
from scripts.fidelity import methods as fm

SIMPLER = {"attn": 0, "attn_global": 1, "global_pool": 2}
CANDIDATES = ("attn", "attn_global", "global_pool", fm.DEFAULT, "paper")


def is_candidate(m: str) -> bool:
    return m in CANDIDATES or m.startswith(fm.WEIGHT_PREFIX)


def complexity(m: str) -> int:
    if m in SIMPLER:
        return SIMPLER[m]
    return 2 if fm.options(m).get("redundancy_weight") == 0 else 3


def load(path: str) -> dict:
    with open(path) as f:
        res = json.load(f)
    if "summaries" not in res:
        raise ValueError(f"{path} is not a results JSON of this version of `bench fidelity` "
                         "(no 'summaries'; rebuild it with --report-only)")
    res["path"] = path
    return res


def _units(results, m):
    out = []
    for r in results:
        for B in r["args"]["budgets"]:
            s = r["summaries"].get(f"{m}@{B}")
            if s is None:
                return None
            out.append((r, B, s))
    return out


def score(results, m) -> float | None:
    units = _units(results, m)
    return None if not units else sum(s["delta_nll"] for *_, s in units) / len(units)


def _pair(r, a, b, B) -> tuple[float, float]:
    """(mean, se) of the per-token NLL difference a - b at budget B in result r."""
    paired = r.get("paired", {})
    if f"{a}|{b}@{B}" in paired:
        p = paired[f"{a}|{b}@{B}"]
        return p["mean"], p["se"]
    if f"{b}|{a}@{B}" in paired:
        p = paired[f"{b}|{a}@{B}"]
        return -p["mean"], p["se"]
    vs = r.get("paired_vs_default", {})  # default - method
    if a == fm.DEFAULT and f"{b}@{B}" in vs:
        return vs[f"{b}@{B}"]["mean"], vs[f"{b}@{B}"]["se"]
    if b == fm.DEFAULT and f"{a}@{B}" in vs:
        return -vs[f"{a}@{B}"]["mean"], vs[f"{a}@{B}"]["se"]
    sa, sb = r["summaries"][f"{a}@{B}"], r["summaries"][f"{b}@{B}"]
    return sa["delta_nll"] - sb["delta_nll"], math.hypot(sa["delta_nll_se"], sb["delta_nll_se"])


def difference(results, a, b) -> dict:
    """Mean over (result, budget) of the paired difference a - b, with its SE."""
    pairs = [_pair(r, a, b, B) for r in results for B in r["args"]["budgets"]]
    n = len(pairs)
    return dict(mean=sum(m for m, _ in pairs) / n,
                se=math.sqrt(sum(se * se for _, se in pairs)) / n)


def choose(results, current: str = fm.DEFAULT) -> dict:
    """Rule steps 2-3 on `results`; {'chosen', 'best', 'ties', 'scores', 'dropped'}."""
    methods = list(dict.fromkeys(k.split("@")[0] for r in results for k in r["summaries"]))
    scores, dropped = {}, []
    for m in filter(is_candidate, methods):
        s = score(results, m)
        (dropped.append(m) if s is None else scores.__setitem__(m, s))
    if not scores:
        raise ValueError("no candidate has every cell in the selecting results")
    best = min(scores, key=scores.get)
    diffs = {m: difference(results, m, best) for m in scores if m != best}
    ties = [best] + [m for m, d in diffs.items() if d["mean"] <= d["se"]]
    chosen = min(ties, key=lambda m: (complexity(m), m != current, scores[m]))
    return dict(chosen=chosen, best=best, ties=ties, scores=scores, diffs=diffs, dropped=dropped)


def checks(results, m: str) -> list[dict]:
    """Rule step 4 for method m on every (result, budget)."""
    out = []
    for r in results:
        for B in r["args"]["budgets"]:
            for other, rule in (("recent", "lower NLL"), ("random", "lower NLL"),
                                ("attn", "at most 1 SE worse")):
                have = all(f"{x}@{B}" in r["summaries"] for x in (m, other))
                if m == other or not have:
                    ok, p = (True if m == other else None), None
                else:
                    p = _pair(r, m, other, B)
                    ok = p[0] < 0 if rule == "lower NLL" else p[0] <= p[1]
                out.append(dict(result=Path(r["path"]).stem, budget=B, baseline=other, rule=rule,
                                ok=ok, paired=p))
    return out


def _agreement_lines(paths, names) -> list[str]:
    lines = []
    for path in paths:
        r = load(path)
        lines.append(f"  {Path(path).stem}:")
        for key, s in sorted(r["summaries"].items()):
            m = key.split("@")[0]
            if m in names or m in ("recent", "full"):
                a = s["agreement"]["majority"]
                lines.append(f"    {key}: agreement {100 * a['mean']:.1f} ± {100 * a['se']:.1f}%,"
                             f" mean tokens {s['tokens']['mean']:.0f}")
    return lines


def decide(paths, tuning=(), block_size=256, agreement=()) -> tuple[str, list[str]]:
    """(chosen method, report lines)."""
    res = [load(p) for p in list(paths) + [t for t in tuning if t not in paths]]
    res = [r for r in res if r["args"]["block_size"] == block_size]
    if not res:
        raise ValueError(f"no results at block size {block_size}")
    tune = [r for r in res if r["path"] in tuning or "tuning" in Path(r["path"]).stem]
    test = [r for r in res if r not in tune]
    select = tune or test
    lines = [f"Rule: scripts/fidelity/decide.py (block size {block_size}). Selecting on "
             + ("tuning texts: " if tune else "TEST texts (no tuning results given): ")
             + ", ".join(Path(r["path"]).stem for r in select)]
    c = choose(select)
    for m, s in sorted(c["scores"].items(), key=lambda kv: kv[1]):
        d = c["diffs"].get(m)
        tie = " (tie: within 1 SE)" if m in c["ties"] and m != c["best"] else ""
        lines.append(f"  {fm.label(m)} (`{m}`): mean Δ NLL {s:+.4f}"
                     + ("  [best]" if m == c["best"] else
                        f"; − best {d['mean']:+.4f} ± {d['se']:.4f}{tie}"))
    if c["dropped"]:
        lines.append(f"  dropped (cells missing): {', '.join(c['dropped'])}")
    m = c["chosen"]
    lines.append(f"Chosen: {fm.label(m)} (`{m}`)"
                 + ("" if m == c["best"] else f", the simplest within 1 SE of `{c['best']}`"))
    if test:
        lines.append("On the test texts (Δ NLL ± SE per budget): " + "; ".join(
            f"{Path(r['path']).stem} " + ", ".join(
                f"{B}: {r['summaries'][f'{m}@{B}']['delta_nll']:+.4f} ± "
                f"{r['summaries'][f'{m}@{B}']['delta_nll_se']:.4f}"
                if f"{m}@{B}" in r["summaries"] else f"{B}: missing"
                for B in r["args"]["budgets"]) for r in test))
        cs = checks(test, m)
        word = {True: "ok", False: "NOT MET", None: "missing"}
        for ch in cs:
            if ch["baseline"] == m:
                continue
            p = "" if ch["paired"] is None else (f" {ch['paired'][0]:+.4f} ± "
                                                 f"{ch['paired'][1]:.4f}")
            lines.append(f"  {ch['result']} budget {ch['budget']}: vs {ch['baseline']} "
                         f"({ch['rule']}){p}: {word[ch['ok']]}")
        if any(ch["ok"] is False for ch in cs):
            passing = [x for x in c["scores"] if all(ch["ok"] is not False
                                                     for ch in checks(test, x))]
            lines.append("The chosen score does NOT meet issue 13's NLL checks on the test "
                         "texts; candidates that do: " + (", ".join(passing) or
                                                          "none: choose by end-to-end answer "
                                                          "agreement"))
    if agreement:
        lines.append("Answer agreement with Full KV (majority answer):")
        lines += _agreement_lines(agreement, {m, fm.DEFAULT})
    from zipage.compression.config import CompressionConfig
    cfg = CompressionConfig(**fm.options(m))
    opts = ", ".join(f"{k}={getattr(cfg, k)!r}" for k in ("use_global_score", "use_pooling",
                                                            "redundancy", "redundancy_weight"))
    lines.append(f"RECOMMENDED DEFAULT: `{m}` ({opts}). This command changes nothing: "
                 "CompressionConfig and configs/engine/zipage.yaml are edited by hand.")
    return m, lines


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("results", nargs="+", help="results JSON of fidelity runs")
    ap.add_argument("--tuning", nargs="*", default=[], help="results that select (default: "
                    "those whose name contains 'tuning')")
    ap.add_argument("--block-size", type=positive_int, default=256)
    ap.add_argument("--agreement", nargs="*", default=[], help="graded agreement JSONs")
    ap.add_argument("--out", default=None, help="also write the lines to this .md file")


def main(args) -> int:
    try:
        _, lines = decide(args.results, args.tuning, args.block_size, args.agreement)
    except ValueError as e:
        print(f"no decision: {e}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    if args.out:
        Path(args.out).write_text("# Scoring default: decision\n\n```\n" + "\n".join(lines)
                                  + "\n```\n")
    return 0
