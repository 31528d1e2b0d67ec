"""Tables of a fidelity run: NLL increase over Full KV per (method, budget), paired
differences between the default score and every other method, and the issue-13 checks."""
from scripts import fidelity_methods as fm
from scripts import fidelity_stats as fs


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
                                       f"({p['mean'] / p['se']:+.1f} SE)")
        out.append(f"* budget {c['budget']}, vs {c['baseline']} ({c['rule']}){detail}: "
                   f"**{word[c['ok']]}**")
    return out
