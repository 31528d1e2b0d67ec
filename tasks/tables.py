"""Paper tables and plots from every run under a folder: `python -m tasks.tables DIR --out OUT`.

    python -m tasks.tables results/multirun --out results/reports   # tables.md/.tex, runs.csv, plots

`load_runs` turns every summary.json under DIR (and the Full-KV baselines those runs point
to) into one pandas DataFrame: a row per run, the summary's numbers plus the run's resolved
config flattened as `config.<key>`. A row's method is its engine config name and budget;
when runs of one engine differ in other settings (a swept `engine.compression.*`, a seed),
the differing keys are added to the method name. Per model and sampling setting:
pass@1 ± stderr per task with the mean accuracy retained and the mean answer agreement vs
Full KV; output tok/s with the speedup over Full KV; per task, maj@k ± stderr for the k its
runs share with the agreement (tasks/tables_answers.py; "n/a" for code and for summaries
scored before these metrics). Runs that are not complete are marked '*'. Plots
(tasks/tables_plots.py): per task, pass@1 and speedup against the budget, the Pareto front,
and accuracy by output length.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
from omegaconf import OmegaConf

from tasks.cli_parser import Parser
from tasks.tables_answers import answer_fields
from tasks.tables_format import METHOD, SETTING, method_label

# Config keys that never tell two runs apart in a table (paths, logging, the sweep's budget
# for a Full-KV run, parallelism).
NOT_VARIANTS = ("config.results_dir", "config.data_dir", "config.use_tqdm", "config.budget",
                "config.scoring.workers", "config.baseline.")
FRONT = ["model", "task", "engine", "budget", "variant", "n", "max_tokens", "temperature", "seed",
         "pass@1", "pass@1_stderr", "accuracy_retained", "output_tokens_per_s", "speedup",
         "num_samples", "num_samples_expected", "complete", "run_dir"]


def _read_run(run_dir: Path) -> dict | None:
    """One run folder -> a flat row (None if it has no summary yet)."""
    path = run_dir / "summary.json"
    if not path.exists():
        return None
    try:
        s = json.loads(path.read_text())
    except ValueError:  # being rewritten by a running job's scoring: skip it this time
        print(f"warning: skipped {path} (not valid JSON; still being written?)", file=sys.stderr)
        return None
    row = {k: v for k, v in s.items() if v is None or isinstance(v, (str, int, float, bool))}
    row["run_dir"] = str(run_dir)  # where it is now (the summary holds where it was scored)
    b = s.get("baseline") or {}
    row.update(accuracy_retained=b.get("accuracy_retained"), speedup=b.get("speedup"),
               baseline_dir=b.get("run_dir"))
    row.update(answer_fields(s))
    row["key"] = run_key(run_dir)
    config = run_dir / "config.yaml"
    if config.exists():
        flat = pd.json_normalize(OmegaConf.to_container(OmegaConf.load(config)), sep=".")
        row.update({f"config.{k}": _hashable(v) for k, v in flat.iloc[0].items()})
    return row


def run_key(run_dir: Path) -> str:
    """What makes two folders one run: the identity run.json records (tasks/identity.py),
    else the folder itself."""
    meta = run_dir / "run.json"
    found = json.loads(meta.read_text()).get("identity") if meta.exists() else None
    return json.dumps(found, sort_keys=True) if found else str(run_dir)


def _hashable(v):
    return json.dumps(v, sort_keys=True) if isinstance(v, (list, dict)) else v


def load_runs(root: str | Path) -> pd.DataFrame:
    """Every run under `root` plus the baselines they point to, one row per distinct run."""
    rows, seen = [], set()
    todo = [p.parent for p in sorted(Path(root).rglob("summary.json"))]
    while todo:
        run_dir = todo.pop(0).resolve()
        if run_dir in seen:
            continue
        seen.add(run_dir)
        row = _read_run(run_dir)
        if row is None:
            continue
        rows.append(row)
        if row.get("baseline_dir"):
            todo.append(Path(row["baseline_dir"]))
    if not rows:
        return pd.DataFrame(columns=FRONT)
    df = pd.DataFrame(rows)
    df["budget"] = df["budget"].astype("Int64")
    # One run generated in two folders (e.g. CPU clamps map budgets 256 and 512 to 128):
    # keep the most complete copy.
    df["duplicates"] = df.groupby("key")["key"].transform("size") - 1
    df = (df.sort_values("num_samples", ascending=False, kind="stable")
            .drop_duplicates("key").reset_index(drop=True))
    df["variant"] = variants(df)
    rest = [c for c in df.columns if c not in FRONT]
    return df[[c for c in FRONT if c in df.columns] + rest]


def variants(df: pd.DataFrame) -> pd.Series:
    """Per row, the config keys that set it apart from the other runs of its engine at one
    budget, task and setting ("" when nothing does)."""
    cell = SETTING + ["task", "engine", "budget"]
    config = [c for c in df.columns if c.startswith("config.") and not c.startswith(NOT_VARIANTS)]
    out = pd.Series("", index=df.index)
    if not config:
        return out
    varying = df.groupby(cell, dropna=False)[config].nunique(dropna=False).gt(1)
    for engine, flags in varying.groupby(level="engine"):
        keys = [c for c in config if flags[c].any()]
        rows = df["engine"] == engine
        if keys:
            out[rows] = df.loc[rows, keys].apply(
                lambda r: ", ".join(f"{_short(k)}={v}" for k, v in r.items()), axis=1)
    # Still two runs in one cell (they differ only in NOT_VARIANTS keys): name their folders.
    dup = df.assign(variant=out).duplicated(cell + ["variant"], keep=False)
    out[dup] = (out[dup] + " " + df.loc[dup, "run_dir"]).str.strip()
    return out


def _short(key: str) -> str:
    return key.removeprefix("config.").removeprefix("engine.")


def methods(df: pd.DataFrame) -> pd.DataFrame:
    """The method rows of one setting, Full KV first, then by engine, budget, variant."""
    m = df[METHOD].drop_duplicates()
    m = m.assign(full=m["engine"] != "fullkv").sort_values(["full", "engine", "budget", "variant"],
                                                           na_position="first")
    return m.drop(columns="full")


def setting_tables(df: pd.DataFrame) -> list[tuple]:
    """(title, accuracy table, throughput table, [(task, answers table)]) per model and
    sampling setting, as text cells."""
    from tasks.tables_answers import answer_tables, mean_agreement
    from tasks.tables_format import accuracy_cell, mark, mean_retained, throughput_cell
    out = []
    for setting, runs in df.groupby(SETTING, dropna=False, sort=True):
        model, n, max_tokens, temp = setting
        order = methods(runs)
        labels = [method_label(*m) for m in order.itertuples(index=False)]
        runs = runs.assign(method=[method_label(*m) for m in runs[METHOD].itertuples(index=False)])
        tasks = sorted(runs["task"].unique())
        cells = runs.set_index(["method", "task"])
        acc = (cells.apply(accuracy_cell, axis=1).unstack("task")
               .reindex(index=labels, columns=tasks).fillna("-"))
        acc["mean retained"] = runs.groupby("method")["accuracy_retained"].mean().map(mean_retained)
        acc["mean retained"] = acc["mean retained"].fillna("-")
        acc["mean agreement"] = mean_agreement(runs).reindex(labels).fillna("-")
        tput = (cells.apply(throughput_cell, axis=1).unstack("task")
                .reindex(index=labels, columns=tasks).fillna("-"))
        acc.index.name = tput.index.name = "method"
        acc.columns.name = tput.columns.name = None
        tput.columns = [f"{t} tok/s (x)" for t in tput.columns]
        out.append((f"{model} (n={n}, max_tokens={max_tokens}, T={temp})", acc, tput,
                    answer_tables(runs, labels, mark)))
    return out


def write_reports(df: pd.DataFrame, out: Path, plots: bool = True) -> list[Path]:
    from tasks.tables_format import latex, markdown
    out.mkdir(parents=True, exist_ok=True)
    tables = setting_tables(df)
    written = [out / "tables.md", out / "tables.tex", out / "runs.csv"]
    written[0].write_text(markdown(df, tables))
    written[1].write_text(latex(tables))
    df.to_csv(written[2], index=False)
    if plots:
        from tasks.tables_plots import plot_all
        written += plot_all(df, out)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog="python -m tasks.tables", description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="?", default="results",
                    help="a folder of runs, e.g. results/multirun (default: results)")
    ap.add_argument("--out", default=None, help="default: <results>/reports")
    ap.add_argument("--no-plots", action="store_true")
    a = ap.parse_args(argv)
    if not Path(a.results).is_dir():
        print(f"{a.results} is not a folder (give the folder of runs, e.g. results/multirun)",
              file=sys.stderr)
        return 2
    df = load_runs(a.results)
    if df.empty:
        print(f"no run summaries under {a.results}", file=sys.stderr)
        return 1
    out = Path(a.out or Path(a.results) / "reports")
    written = write_reports(df, out, plots=not a.no_plots)
    print(written[0].read_text())
    print("written: " + ", ".join(str(p) for p in written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
