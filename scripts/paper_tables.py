"""Paper-style tables and plots from every run summary under a results folder.

    python scripts/paper_tables.py                      # results/ -> results/reports/
    python scripts/paper_tables.py RESULTS_DIR --out DIR --no-plots

Per model (and sampling setting): an accuracy table (pass@1 per task, Full KV first, then
each engine and budget, last column the mean accuracy retained vs Full KV) and a throughput
table (output tok/s per task and the speedup over Full KV, measured in the same sweep).
Writes tables.md, runs.csv and, with matplotlib, one plot per (model, task): pass@1 and
speedup against the budget. Partial runs are marked with '*'.
"""
import argparse
import csv
import json
import sys
from collections import defaultdict
from pathlib import Path

FIELDS = ["model", "task", "engine", "budget", "n", "max_tokens", "temperature", "pass@1",
          "pass@1_stderr", "output_tokens_per_s", "accuracy_retained", "speedup",
          "num_samples", "num_samples_expected", "complete", "run_dir"]


def load_runs(root: Path) -> list[dict]:
    """One row per run summary; Full KV rows come from the baselines the runs point to."""
    rows, seen = [], set()
    for path in sorted(root.rglob("summary.json")):
        s = json.loads(path.read_text())
        for run in (s, s.get("baseline") or {}):
            if "pass@1" not in run or run.get("run_dir") in seen:
                continue
            if run is not s:  # the baseline block: read the baseline's own summary
                base_path = Path(run.get("run_dir") or "") / "summary.json"
                if not base_path.exists():
                    continue
                run = json.loads(base_path.read_text())
            seen.add(run["run_dir"])
            b = run.get("baseline") or {}
            rows.append({**{k: run.get(k) for k in FIELDS},
                         "accuracy_retained": b.get("accuracy_retained") if run.get("budget") else None,
                         "speedup": b.get("speedup") if run.get("budget") else None})
    return rows


def _setting(r):
    return (r["model"], r["n"], r["max_tokens"], r["temperature"])


def _method(r):
    return ("Full KV", 0) if r["budget"] is None else (r["engine"], r["budget"])


def _cell(r, key, fmt):
    if r is None or r.get(key) is None:
        return "-"
    return format(r[key], fmt) + ("" if r.get("complete") else "*")


def tables(rows: list[dict]) -> str:
    out = []
    groups = defaultdict(list)
    for r in rows:
        groups[_setting(r)].append(r)
    for (model, n, max_tokens, temp), runs in sorted(groups.items(), key=str):
        tasks = sorted({r["task"] for r in runs})
        methods = sorted({_method(r) for r in runs}, key=lambda m: (m[0] != "Full KV", m))
        at = {(r["task"], _method(r)): r for r in runs}
        label = lambda m: m[0] if m[0] == "Full KV" else f"{m[0]} b={m[1]}"  # noqa: E731
        out += [f"## {model} (n={n}, max_tokens={max_tokens}, T={temp})", "",
                "| method | " + " | ".join(tasks) + " | mean retained |",
                "|---|" + "---|" * (len(tasks) + 1)]
        for m in methods:
            cells = [_cell(at.get((t, m)), "pass@1", ".4f") for t in tasks]
            kept = [at[t, m]["accuracy_retained"] for t in tasks
                    if (t, m) in at and at[t, m]["accuracy_retained"] is not None]
            mean = f"{sum(kept) / len(kept):.1f}%" if kept else "-"
            out.append(f"| {label(m)} | " + " | ".join(cells) + f" | {mean} |")
        out += ["", "| method | " + " | ".join(f"{t} tok/s (x)" for t in tasks) + " |",
                "|---|" + "---|" * len(tasks)]
        for m in methods:
            cells = []
            for t in tasks:
                r = at.get((t, m))
                x = "" if r is None or r["speedup"] is None else f" ({r['speedup']:.2f}x)"
                cells.append(_cell(r, "output_tokens_per_s", ".0f") + x)
            out.append(f"| {label(m)} | " + " | ".join(cells) + " |")
        out.append("")
    if any(not r.get("complete") for r in rows):
        out.append("\\* partial run: rerun its command to finish it.")
    return "\n".join(out)


def plots(rows: list[dict], out: Path) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    written = []
    groups = defaultdict(list)
    for r in rows:
        groups[(*_setting(r), r["task"])].append(r)
    for (model, n, max_tokens, temp, task), runs in sorted(groups.items(), key=str):
        full = next((r for r in runs if r["budget"] is None), None)
        fig, (acc, spd) = plt.subplots(1, 2, figsize=(9, 3.4))
        for engine in sorted({r["engine"] for r in runs if r["budget"] is not None}):
            pts = sorted((r["budget"], r) for r in runs if r["engine"] == engine and r["budget"])
            xs = [b for b, _ in pts]
            acc.plot(xs, [r["pass@1"] for _, r in pts], "o-", label=engine)
            spd.plot(xs, [r["speedup"] or float("nan") for _, r in pts], "o-", label=engine)
        if full is not None:
            acc.axhline(full["pass@1"], color="gray", ls="--", label="Full KV")
            spd.axhline(1.0, color="gray", ls="--", label="Full KV")
        for ax, name in ((acc, "pass@1"), (spd, "speedup over Full KV (output tok/s)")):
            ax.set_xscale("log", base=2)
            ax.set_xlabel("KV budget (tokens)")
            ax.set_ylabel(name)
            ax.legend(fontsize=8)
        fig.suptitle(f"{task} | {model} | n={n}, max_tokens={max_tokens}, T={temp}")
        fig.tight_layout()
        path = out / f"{task}_{model}_n{n}_len{max_tokens}.png".replace("/", "-")
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
    return written


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="?", default="results")
    ap.add_argument("--out", default="results/reports")
    ap.add_argument("--no-plots", action="store_true")
    a = ap.parse_args(argv)
    rows = load_runs(Path(a.results))
    if not rows:
        print(f"no run summaries under {a.results}", file=sys.stderr)
        return 1
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    text = tables(rows)
    (out / "tables.md").write_text(f"# Results ({len(rows)} runs)\n\n" + text + "\n")
    with open(out / "runs.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    print(text)
    if not a.no_plots:
        for p in plots(rows, out):
            print(f"plot: {p}")
    print(f"written: {out / 'tables.md'}, {out / 'runs.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
