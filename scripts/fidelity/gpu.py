"""Issue 13 in one time-boxed call: fidelity at block 256 and 64, answer agreement, decision.

  python -m scripts.bench fidelity-gpu --max-wall-s 400            # the H200 (profile h200)
  python -m scripts.bench fidelity-gpu --profile tiny --max-wall-s 90   # logic check, CPU
  python -m scripts.bench fidelity-gpu --priorities 4 --workers 12       # issue 17: presets

Tasks (plan.py) run in priority order in worker processes (timebox.py); every finished cell
is on disk at once; a cell that cannot finish before --max-wall-s is not started, one running
at the deadline is killed. Then the tables of every run are rebuilt from the finished cells
(`python -m scripts.bench fidelity <flags> --report-only`, the same commands as printed), the
rule of `bench fidelity decide` is applied to the block-256 results and a summary is printed.
Agreement cells are saved ungraded (math-verify is not on the GPU image): grade them with the
printed commands.
Total wall time: --max-wall-s + the reports (about half a minute).
"""
import argparse
import json
import os
import shlex
import time
from pathlib import Path

from scripts.arg_types import positive_int, positive_number, positive_seconds
from scripts.fidelity import plan as fp
from scripts.fidelity import timebox

ROOT = Path(__file__).resolve().parents[2]


def preflight(p: fp.Profile) -> None:
    """Fail in seconds, not after the time budget: model file, GGUF reader, data, device."""
    from zipage.models.loader import resolve
    try:
        path, gguf = resolve(p.model, "auto")  # a GGUF file is converted here, once
    except ImportError as e:
        raise SystemExit(f"{e} (or put its wheel on PYTHONPATH, e.g. in /tmp/site)") from None
    data = os.environ.get("ZIPAGE_DATA_DIR") or str(ROOT.parent / "shared/datasets")
    for name in ("math500.jsonl", "gsm8k.jsonl"):
        if not os.path.exists(os.path.join(data, name)):
            raise SystemExit(f"missing dataset {data}/{name} (set ZIPAGE_DATA_DIR)")
    if p.device == "cuda":
        import torch
        if not torch.cuda.is_available():
            raise SystemExit("profile needs CUDA and none is available")
    print(f"model {os.path.join(path, gguf or '')}; data {data}; device {p.device} {p.dtype}",
          flush=True)


def report(flags: str) -> str | None:
    """Rebuild one fidelity run's tables from its cells; the JSON path, None if not possible."""
    from scripts.fidelity import nll as fidelity, batch as fidelity_batch
    args = fidelity_batch.parse(fidelity, flags + " --report-only")
    args.command_line = "python -m scripts.bench fidelity " + flags
    try:
        fidelity.main(args)
    except (SystemExit, Exception) as e:  # nothing finished for this run
        print(f"  no report for {args.out}: {e}", flush=True)
        return None
    return args.out + ".json"


def table(json_path: str) -> list[str]:
    with open(json_path) as f:
        r = json.load(f)
    budgets = r["args"]["budgets"]
    lines = [f"{Path(json_path).stem} (Δ NLL vs Full KV ± SE; {len(r['text_sources'])} texts; "
             f"issue-13 checks {r['verdict']})",
             "  " + f"{'method':<12}" + "".join(f"{'budget ' + str(B):>20}" for B in budgets)]
    for m in r["args"]["methods"]:
        cells = []
        for B in budgets:
            s = r["summaries"].get(f"{m}@{B}")
            cells.append(f"{s['delta_nll']:+.4f} ± {s['delta_nll_se']:.4f}" if s else "missing")
        lines.append("  " + f"{m:<12}" + "".join(f"{c:>20}" for c in cells))
    return lines


def agreement_lines(flags_by_name: dict) -> list[str]:
    """Finished agreement cells: generated length without grading (grading needs math-verify)."""
    from scripts.fidelity import agreement, batch as fidelity_batch
    lines = []
    for name, flags in flags_by_name.items():
        args = fidelity_batch.parse(agreement, flags)
        root = agreement.store(args).root
        cells = sorted(root.glob("*.json")) if root.exists() else []
        lines.append(f"{name}: {len(cells)} cells in {root}")
        for c in cells:
            with open(c) as f:
                rows = json.load(f)["rows"]
            toks = sum(r["completion_tokens"] for r in rows) / len(rows)
            cut = sum(r["finish_reason"] == "length" for r in rows) / len(rows)
            lines.append(f"  {c.stem}: mean {toks:.0f} tokens, {100 * cut:.0f}% cut at max tokens")
        grade = " ".join(flags.replace("--no-grade", "").split())
        lines.append(f"  grade (CPU, math-verify): python -m scripts.bench agreement {grade} "
                     "--report-only")
    return lines


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--profile", choices=sorted(fp.PROFILES), default="h200")
    ap.add_argument("--max-wall-s", type=positive_seconds, default=400.0,
                    help="no cell ends later than this after the start (reports come after)")
    ap.add_argument("--workers", type=positive_int, default=None, help="parallel engine processes")
    ap.add_argument("--priorities", type=int, nargs="+", default=[1, 2, 3],
                    choices=[1, 2, 3, 4, 5, 6, 7],
                    help="1: block 256, 2: block 64, 3: answer agreement, 4: the presets, "
                         "5: MATH-500 agreement over every problem (default vs recent), "
                         "6: agreement of the recency-protected candidates (GSM8K tuning "
                         "split, MATH-500), 7: their block-256 NLL")
    ap.add_argument("--results-dir", default="results")
    ap.add_argument("--log-dir", default="/tmp/fidelity_gpu_logs")
    ap.add_argument("--mem-limit-gb", type=positive_number, default=100.0,
                    help="sum of the running tasks' estimated GPU memory")
    ap.add_argument("--model", default=None, help="override the profile's model")
    ap.add_argument("--dtype", default=None, help="override the profile's dtype (float32)")


def main(args) -> int:
    t0 = time.monotonic()
    p = fp.PROFILES[args.profile]
    if args.model:
        p.model = args.model
    if args.dtype:
        p.dtype = args.dtype
    preflight(p)
    results = args.results_dir.rstrip("/")
    os.makedirs(results, exist_ok=True)
    tasks = fp.tasks(p, results, args.priorities)
    print(f"{len(tasks)} tasks, {args.workers or p.workers} workers, budget "
          f"{args.max_wall_s:.0f} s; worker logs in {args.log_dir}", flush=True)

    def event(msg):
        print(f"[{time.monotonic() - t0:6.0f} s] {msg}", flush=True)
    env = {"ZIPAGE_FIDELITY_MODEL": p.model, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    outcomes = timebox.run(tasks, args.workers or p.workers, args.max_wall_s - (
        time.monotonic() - t0), args.log_dir, timebox.Estimator(p.prior_rate, p.overhead_s),
        args.mem_limit_gb, env=env, on_event=event, init="scripts.fidelity.engine:warm")
    cells_s = time.monotonic() - t0

    print("\n=== reports", flush=True)
    groups = fp.fidelity_groups(p, results)
    jsons = {role: report(flags) for role, flags in groups.items()}
    lines = []
    for role, path in jsons.items():
        if path:
            lines += table(path) + [f"  rebuild: python -m scripts.bench fidelity {groups[role]} "
                                    "--report-only", ""]
    main_jsons = [jsons[r] for r in ("solutions", "generated", "tuning") if jsons[r]]
    if main_jsons:
        from scripts.fidelity import decide as fidelity_decide
        try:
            _, dl = fidelity_decide.decide(main_jsons, block_size=p.block)
            lines += ["=== decision (python -m scripts.bench fidelity decide "
                      + " ".join(map(shlex.quote, main_jsons)) + f" --block-size {p.block})"]
            lines += dl
        except ValueError as e:
            lines.append(f"=== decision: not possible ({e})")
    lines += ["", "=== agreement (ungraded)"] + agreement_lines(
        fp.agreement_groups(p, results, args.priorities))
    width = max(len(t.name) for t in tasks)
    lines += ["", f"=== tasks (cells phase {cells_s:.0f} s, total "
              f"{time.monotonic() - t0:.0f} s)"]
    counts = {}
    for t in tasks:
        o = outcomes[t.name]
        counts[o.status] = counts.get(o.status, 0) + 1
        lines.append(f"  P{t.priority} {t.name:<{width}} {o.status:<12} {o.seconds:6.0f} s  "
                     f"{o.detail[:100]}")
    lines.append("  " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
    text = "\n".join(lines)
    print(text, flush=True)
    with open(f"{results}/fidelity_gpu_summary{p.suffix}.txt", "w") as f:
        f.write(text + "\n")
    return 0 if not any(o.status == "failed" for o in outcomes.values()) else 1

