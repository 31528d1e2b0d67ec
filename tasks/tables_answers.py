"""The answer metrics in tasks/tables.py: maj@k, agreement with Full KV and accuracy by output
length, read from summary.json into a run's row, and one table per task of the maj@k and
agreement cells. Summaries written before these metrics existed lack them, and code tasks
have no maj@k (it is not defined for code): their cells read "n/a", never 0."""
from __future__ import annotations

import json
import math

import pandas as pd

NA = "n/a"
AGREEMENT = "agreement"
IN_BASELINE = "answers in Full KV"


def _number(x) -> float | None:
    ok = isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
    return float(x) if ok else None


def _dict(x) -> dict:
    return x if isinstance(x, dict) else {}


def answer_fields(summary: dict) -> dict:
    """A summary's answer metrics as flat row fields (absent or malformed ones left out):
    maj@K and maj@K_stderr per k, answer_agreement (+ _stderr, _unanswered_by_both,
    _unanswered_by_one),
    sample_answer_in_baseline, and accuracy_by_length as JSON text (for the plot)."""
    row: dict = {}
    for k, v in _dict(summary.get("maj@k")).items():
        if str(k).isdigit() and _number(_dict(v).get("mean")) is not None:
            row[f"maj@{k}"] = _number(v["mean"])
            row[f"maj@{k}_stderr"] = _number(v.get("stderr"))
    base = _dict(summary.get("baseline"))
    agreement = _dict(base.get("answer_agreement"))
    if _number(agreement.get("mean")) is not None:
        row["answer_agreement"] = _number(agreement["mean"])
        row["answer_agreement_stderr"] = _number(agreement.get("stderr"))
        for key in ("unanswered_by_both", "unanswered_by_one"):
            row[f"answer_agreement_{key}"] = _number(agreement.get(key))
    if _number(base.get("sample_answer_in_baseline")) is not None:
        row["sample_answer_in_baseline"] = _number(base["sample_answer_in_baseline"])
    by_length = _dict(summary.get("accuracy_by_length"))
    if isinstance(by_length.get("bins"), list) and by_length["bins"]:
        row["accuracy_by_length"] = json.dumps(by_length)
    return row


def shared_ks(runs: pd.DataFrame) -> list[int]:
    """The k of every maj@k that all runs reporting maj@k have (runs without any are n/a)."""
    cols = [c for c in runs.columns if c.startswith("maj@") and c[4:].isdigit()]
    have = [{int(c[4:]) for c in cols if pd.notna(r[c])} for _, r in runs.iterrows()]
    have = [ks for ks in have if ks]
    return sorted(set.intersection(*have)) if have else []


def _present(row, key) -> bool:
    return key in row.index and pd.notna(row[key])


def maj_cell(row, k: int, mark: str = "") -> str:
    key = f"maj@{k}"
    if not _present(row, key):
        return NA
    se = row.get(f"{key}_stderr")
    return (f"{row[key]:.4f}" if pd.isna(se) else f"{row[key]:.4f} ± {se:.4f}") + mark


def agreement_cell(row, mark: str = "") -> str:
    if not _present(row, "answer_agreement"):
        return NA
    se = row.get("answer_agreement_stderr")
    text = (f"{100 * row['answer_agreement']:.1f}" + ("" if pd.isna(se) else f" ± {100 * se:.1f}")
            + "%")
    return text + mark


def in_baseline_cell(row) -> str:
    return f"{100 * row['sample_answer_in_baseline']:.1f}%" if _present(
        row, "sample_answer_in_baseline") else NA


def mean_agreement(runs: pd.DataFrame) -> pd.Series:
    """Per method, the agreement averaged over its tasks that report one ("n/a" if none)."""
    if "answer_agreement" not in runs.columns:
        return pd.Series(NA, index=runs["method"].unique())
    return runs.groupby("method")["answer_agreement"].mean().map(
        lambda x: NA if pd.isna(x) else f"{100 * x:.1f}%")


def answer_tables(runs: pd.DataFrame, labels: list[str], mark) -> list[tuple[str, pd.DataFrame]]:
    """(task, table) per task: rows = methods (in `labels` order), columns = maj@k for the k
    its runs share, agreement with Full KV and the share of answers Full KV also gave.
    runs: one setting's rows with a `method` column; mark(row) -> the partial-run marker."""
    out = []
    for task, t in runs.groupby("task", sort=True):
        ks = shared_ks(t)
        cells = {}
        for _, r in t.iterrows():
            maj = ({f"maj@{k}": maj_cell(r, k, mark(r)) for k in ks} if ks else {"maj@k": NA})
            cells[r["method"]] = {**maj, AGREEMENT: agreement_cell(r, mark(r)),
                                  IN_BASELINE: in_baseline_cell(r)}
        table = pd.DataFrame.from_dict(cells, orient="index").reindex(labels).fillna("-")
        table.index.name = "method"
        out.append((task, table))
    return out
