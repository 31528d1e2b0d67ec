"""Tables of `bench fidelity-domains`: per domain and budget, every method's NLL increase over
Full KV and its paired difference from the published default, and the stated rule that says
whether any variant should replace the default.

Standard errors are across texts (the mean of each text's per-token differences, then the SE
of those means): tokens of one text are not independent, so a per-token SE would overstate
the precision. The per-token SE is kept in the JSON for comparison with older tables.

The rule (issue 31): a variant is recommended over the published default only if, on the TEST
texts, it predicts better than the default in every domain at every budget, each time by more
than 2 standard errors of the paired difference. The candidate put to that test is chosen on
the TUNING texts (lowest mean NLL increase over every domain and budget), among methods whose
memory stays bounded (not SnapKV as published, which compresses only the prompt) and other
than the random floor.
"""
import json
import platform
import subprocess

from scripts.fidelity import methods as fm
from scripts.fidelity import stats as fs
from scripts.fidelity.cells import CellStore
from scripts.fidelity.domain_cells import cell_key, flat_texts

NOT_CANDIDATES = {fm.DEFAULT, "paper", "random", "snapkv"}


def _mean_se(xs) -> tuple[float, float]:
    return fs.mean(xs), fs.standard_error(xs)


def _scored_diffs(rec, prompt, ref, ref_prompt, start) -> tuple[list[float], list[bool]]:
    lp, top, f_lp, f_top = fs.aligned(rec, prompt, ref, ref_prompt, start)
    return [b - a for a, b in zip(lp, f_lp)], [a == b for a, b in zip(top, f_top)]


def load_cells(out: str, stored: dict, methods):
    s, store = stored["settings"], CellStore(f"{out}_cells")
    full = store.load("full_kv", cell_key(s, None, None))
    runs = {}
    for m in methods:
        for B in s["budgets"]:
            cell = store.load(f"{m}@{B}", cell_key(s, m, B))
            if cell is not None:
                runs[m, B] = cell
    return full, runs


def per_text(full, runs, stored) -> dict:
    """(method, budget) -> list over texts of (mean NLL increase, argmax agreement, diffs)."""
    s = stored["settings"]
    p_full = min(s["budgets"])
    out = {}
    for (m, B), cell in runs.items():
        rows = []
        for rec, ref in zip(cell["records"], full["records"], strict=True):
            d, agree = _scored_diffs(rec, B, ref, p_full, B + s["block_size"])
            rows.append(dict(delta=fs.mean(d), agree=fs.mean(agree), diffs=d))
        out[m, B] = rows
    _, where = flat_texts(stored["texts"])
    return out, where


def summarize(stored, full, runs, methods) -> dict:
    s = stored["settings"]
    texts, where = per_text(full, runs, stored)
    result = {}
    for (domain, split) in dict.fromkeys(where):
        idx = [i for i, w in enumerate(where) if w == (domain, split)]
        for B in s["budgets"]:
            base = texts.get((fm.DEFAULT, B))
            for m in methods:
                rows = texts.get((m, B))
                if rows is None:
                    continue
                deltas = [rows[i]["delta"] for i in idx]
                tokens = [x for i in idx for x in rows[i]["diffs"]]
                entry = dict(delta=_mean_se(deltas), delta_se_per_token=fs.standard_error(tokens),
                             argmax_agreement=fs.mean([rows[i]["agree"] for i in idx]),
                             texts=len(idx), tokens=len(tokens),
                             per_text=[round(x, 6) for x in deltas])
                if base is not None and m != fm.DEFAULT:
                    paired = [rows[i]["delta"] - base[i]["delta"] for i in idx]
                    entry["vs_default"] = _mean_se(paired)
                result[domain, split, B, m] = entry
    return result


def nominate(summary: dict, domains, budgets, methods) -> str | None:
    """The candidate with the lowest mean NLL increase on the tuning texts."""
    scores = {}
    for m in methods:
        if m in NOT_CANDIDATES:
            continue
        cells = [summary.get((d, "tuning", B, m)) for d in domains for B in budgets]
        if all(cells):
            scores[m] = fs.mean([c["delta"][0] for c in cells])
    return min(scores, key=scores.get) if scores else None


def wins_everywhere(summary: dict, method: str, domains, budgets) -> tuple[bool, list[str]]:
    """Paired difference from the default < 0 by more than 2 SE in every test cell."""
    misses = []
    for d in domains:
        for B in budgets:
            c = summary.get((d, "test", B, method))
            if c is None or "vs_default" not in c:
                misses.append(f"{d}@{B}: not measured")
                continue
            mean, se = c["vs_default"]
            if not (mean < 0 and mean + 2 * se < 0):
                misses.append(f"{d}@{B}: {mean:+.4f} ± {se:.4f}")
    return not misses, misses


def _cell(c) -> str:
    if c is None:
        return "not run"
    m, se = c["delta"]
    text = f"{m:+.4f} ± {se:.4f} / {100 * c['argmax_agreement']:.1f}%"
    if "vs_default" in c:
        pm, pse = c["vs_default"]
        text += f" / {pm:+.4f} ± {pse:.4f}"
    return text


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except Exception:
        return "unknown"


def write_report(out: str, stored: dict, methods) -> dict:
    s = stored["settings"]
    full, runs = load_cells(out, stored, methods)
    if full is None:
        raise SystemExit(f"no Full-KV cell in {out}_cells: nothing to tabulate")
    summary = summarize(stored, full, runs, methods)
    domains = list(stored["texts"])
    budgets = s["budgets"]
    cand = nominate(summary, domains, budgets, methods)
    verdicts = {m: wins_everywhere(summary, m, domains, budgets) for m in methods
                if m != fm.DEFAULT}
    recommended = cand if cand and verdicts[cand][0] else None
    lines = ["# Fidelity per domain: every method against Full KV (issue 31)", "",
             f"Command: `{stored.get('command', '')}`", "",
             f"Model {s['model']}, {s['dtype']} on {s['device']}; block {s['block_size']}, "
             f"budgets {', '.join(map(str, budgets))}; texts of {s['text_tokens']} tokens; a run "
             f"at budget B forces text[B:] and is scored from B + {s['block_size']}. Report "
             f"commit {_commit()}; machine of the report {platform.node()}.", "",
             "Cell: NLL increase over Full KV (nats/token, mean over texts ± SE across texts) / "
             "argmax agreement with Full KV / paired difference from the published default "
             "(negative: the method predicts better) ± SE across texts.", ""]
    for d in domains:
        n = {sp: len(stored["texts"][d][sp]) for sp in ("tuning", "test")}
        lines += [f"## {d}: test texts ({n['test']}; tuning texts: {n['tuning']})", "",
                  "| method | " + " | ".join(f"budget {B}" for B in budgets) + " |",
                  "|---|" + "---|" * len(budgets)]
        for m in methods:
            lines.append(f"| {fm.label(m)} | " + " | ".join(
                _cell(summary.get((d, "test", B, m))) for B in budgets) + " |")
        lines.append("")
    lines += ["## The rule", "",
              f"Candidate chosen on the tuning texts: **{cand or 'none'}**"
              + (f" ({fm.label(cand)})" if cand else "") + ".", ""]
    for m, (ok, misses) in verdicts.items():
        lines.append(f"* {m}: {'wins in every test cell' if ok else 'does not win everywhere: ' + '; '.join(misses[:6])}")
    lines += ["", "**Verdict: " + (f"recommend {recommended} over the published default.**"
                                   if recommended else
                                   "the published Zipage configuration stays the default** "
                                   "(no variant wins in every domain at both budgets by more "
                                   "than 2 SE).")]
    with open(f"{out}.md", "w") as f:
        f.write("\n".join(lines) + "\n")
    payload = dict(settings=s, command=stored.get("command"), candidate=cand,
                   recommended=recommended,
                   verdicts={m: dict(wins=ok, misses=mi) for m, (ok, mi) in verdicts.items()},
                   cells=[dict(domain=d, split=sp, budget=B, method=m, **{
                       k: (list(v) if isinstance(v, tuple) else v) for k, v in c.items()})
                          for (d, sp, B, m), c in summary.items()],
                   seconds={f"{m}@{B}": round(c["seconds"], 1) for (m, B), c in runs.items()},
                   full_kv_seconds=round(full["seconds"], 1))
    with open(f"{out}.json", "w") as f:
        json.dump(payload, f, indent=1)
    return payload
