"""Plots of tasks/tables.py's runs: per (setting, task) pass@1 and speedup against the
budget, accuracy against throughput with the Pareto front over engines and budgets, and
accuracy by output length."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from tasks.tables_format import METHOD, SETTING, method_label


def _name(setting, task: str, kind: str) -> str:
    model, n, max_tokens, _ = setting
    return f"{task}_{model}_n{n}_len{max_tokens}_{kind}.png".replace("/", "-")


def _title(setting, task: str) -> str:
    model, n, max_tokens, temp = setting
    return f"{task} | {model} | n={n}, max_tokens={max_tokens}, T={temp}"


def _save(plt, fig, path: Path) -> bool:
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def pareto_front(points: pd.DataFrame) -> pd.DataFrame:
    """The points no other point beats on both output tok/s and pass@1, by tok/s."""
    pts = points.sort_values(["output_tokens_per_s", "pass@1"], ascending=False)
    best, keep = float("-inf"), []
    for i, p in pts["pass@1"].items():
        if p > best:
            best = p
            keep.append(i)
    return pts.loc[keep].sort_values("output_tokens_per_s")


def budget_plot(plt, runs: pd.DataFrame, setting, task: str, path: Path) -> bool:
    """pass@1 and speedup against the budget, one line per engine (and variant)."""
    budgeted = runs[runs["budget"].notna()]
    if budgeted.empty:
        return False
    fig, (acc, spd) = plt.subplots(1, 2, figsize=(9, 3.4))
    for (engine, variant), line in budgeted.groupby(["engine", "variant"], sort=True):
        line = line.sort_values("budget")
        label = engine + (f" ({variant})" if variant else "")
        acc.plot(line["budget"].astype(float), line["pass@1"].astype(float), "o-", label=label)
        spd.plot(line["budget"].astype(float), line["speedup"].astype(float), "o-", label=label)
    for _, full in runs[runs["budget"].isna()].iterrows():
        label = method_label(full["engine"], full["budget"], full["variant"])
        acc.axhline(full["pass@1"], color="gray", ls="--", label=label)
    spd.axhline(1.0, color="gray", ls="--", label="Full KV")
    lo, hi = float(budgeted["budget"].min()), float(budgeted["budget"].max())
    for ax, name in ((acc, "pass@1"), (spd, "speedup over Full KV (output tok/s)")):
        ax.set_xscale("log", base=2)
        ax.set_xlim(lo / 1.5, hi * 1.5)  # set, not inferred: a panel may have no finite point
        ax.set_xlabel("KV budget (tokens)")
        ax.set_ylabel(name)
        ax.legend(fontsize=8)
    fig.suptitle(_title(setting, task))
    return _save(plt, fig, path)


def pareto_plot(plt, runs: pd.DataFrame, setting, task: str, path: Path) -> bool:
    """pass@1 against output tok/s for every method; the front joined by a line."""
    pts = runs.dropna(subset=["pass@1", "output_tokens_per_s"])
    if pts.empty:
        return False
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for engine, group in pts.groupby("engine", sort=True):
        ax.scatter(group["output_tokens_per_s"].astype(float), group["pass@1"].astype(float),
                   label="Full KV" if engine == "fullkv" else engine)
        for _, r in group.iterrows():
            text = "" if pd.isna(r["budget"]) else str(r["budget"])
            ax.annotate(text, (r["output_tokens_per_s"], r["pass@1"]), fontsize=7,
                        xytext=(3, 3), textcoords="offset points")
    front = pareto_front(pts)
    ax.plot(front["output_tokens_per_s"].astype(float), front["pass@1"].astype(float), "k:",
            lw=1, label="Pareto front")
    ax.set_xlabel("output tok/s")
    ax.set_ylabel("pass@1")
    ax.legend(fontsize=8)
    ax.set_title(_title(setting, task) + "\n(labels: KV budget)", fontsize=9)
    return _save(plt, fig, path)


def _length_bins(text) -> list[dict]:
    """A row's accuracy_by_length bins ([] when absent or malformed)."""
    try:
        bins = json.loads(text)["bins"] if isinstance(text, str) else []
        return [b for b in bins if {"lo", "hi", "samples"} <= set(b)]
    except (ValueError, KeyError, TypeError):
        return []


def length_plot(plt, runs: pd.DataFrame, setting, task: str, path: Path) -> bool:
    """Accuracy (pass@1 of the samples in a bin) and the share of samples against output
    length, one line per method, Full KV included; a point per length bin at its middle."""
    lines = [(r, _length_bins(r.get("accuracy_by_length"))) for _, r in runs.iterrows()]
    lines = [(r, bins) for r, bins in lines if bins]
    if not lines:
        return False
    fig, (acc, share) = plt.subplots(1, 2, figsize=(9, 3.4))
    for r, bins in lines:
        label = method_label(r["engine"], r["budget"], r["variant"])
        style = "k--o" if pd.isna(r["budget"]) else "o-"
        mid = [(b["lo"] + b["hi"]) / 2 for b in bins]
        total = sum(b["samples"] for b in bins) or 1
        acc.plot(mid, [float("nan") if b.get("accuracy") is None else b["accuracy"] for b in bins],
                 style, label=label)
        share.plot(mid, [b["samples"] / total for b in bins], style, label=label)
    edges = sorted({e for _, bins in lines for b in bins for e in (b["lo"], b["hi"])})
    for ax, name in ((acc, "accuracy of the bin's samples"), (share, "share of samples")):
        ax.set_xticks(edges)
        ax.set_xlabel("output length (tokens); last bin ends at max_tokens")
        ax.set_ylabel(name)
        ax.set_ylim(-0.05, 1.05)
        ax.legend(fontsize=8)
    fig.suptitle(_title(setting, task))
    return _save(plt, fig, path)


def plot_all(df: pd.DataFrame, out: Path) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    written = []
    for key, runs in df.groupby(SETTING + ["task"], dropna=False, sort=True):
        setting, task = key[:4], key[4]
        runs = runs.sort_values(METHOD)
        for kind, plot in (("budget", budget_plot), ("pareto", pareto_plot),
                           ("length", length_plot)):
            path = out / _name(setting, task, kind)
            if plot(plt, runs, setting, task, path):
                written.append(path)
    return written
