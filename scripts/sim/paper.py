"""`bench simulate --paper`: the paper workload (zipage/sim/paper.py) on the whole GPU and on
40 / 80 GiB devices, the speedup-vs-mean-output-length sweep over budgets, and its plot with
the measured points (and the simulator's prediction of each measured workload)."""
from pathlib import Path

from scripts import common as bc
from scripts.sim.jobs import job, print_report, to_report
from zipage.sim.paper import GPU_SIZES_GIB, KV_DTYPE_REPORTS, PAPER, kv_dtype_comparison, \
    paper_requests, plot_speedup, run_jobs
from zipage.sim.validate import load_report, mean_length, predict_report


def paper(a, cal) -> int:
    # block size, prompt length, cap, budget: their defaults are the paper's, a given value wins
    if a.output_len or a.replay:
        raise SystemExit("--paper draws its lengths (capped lognormal): give --mean-output-len "
                         "and --max-output-len, not --output-len / --replay")
    paper_mean = a.mean_output_len or PAPER["mean_output_len"]
    too_long = [m for m in [*a.sweep_means, paper_mean] if m > a.max_output_len]
    if too_long:
        raise SystemExit(f"--paper: mean output {too_long[0]:g} is above the cap "
                         f"--max-output-len {a.max_output_len}")
    num_prompts = max(1, a.num_requests // PAPER["samples_per_prompt"])
    workloads, jobs = {}, {}

    def requests(mean):
        if mean not in workloads:
            workloads[mean] = paper_requests(mean, a.max_output_len, a.sigma, num_prompts,
                                             seed=a.seed)
        return workloads[mean][0]

    def add(engine, mean, budget, gib=None, kv="auto"):
        key = (engine, mean, budget if engine == "zipage" else None, gib, kv)
        if key not in jobs:
            where = (f", {gib} GiB" if gib else "") + (f", {kv} KV" if kv != "auto" else "")
            jobs[key] = job(a, cal, engine, requests(mean), budget, gib, label=(
                f"{engine} mean {mean:.0f}" + (f" budget {budget}" if budget else "") + where),
                kv_dtype=kv)

    for mean in a.sweep_means:
        add("fullkv", mean, None)
        for budget in a.sweep_budgets:
            add("zipage", mean, budget)
    for gib in (None, *GPU_SIZES_GIB):
        add("fullkv", paper_mean, None, gib)
        add("zipage", paper_mean, a.budget, gib)
    fp8 = a.kv_cache_dtype == "fp8"
    if fp8:  # the whole GPU with FP8 KV: both engines
        add("fullkv", paper_mean, None, None, "fp8")
        add("zipage", paper_mean, a.budget, None, "fp8")
    out_json = a.json or "results/bench/paper_prediction.json"
    checkpoint = out_json + ".partial.jsonl"  # each finished simulation: a rerun resumes
    print(f"== {len(jobs)} simulations of {len(requests(paper_mean))} requests each "
          f"(finished ones also go to {checkpoint})")
    results = dict(zip(jobs, run_jobs(list(jobs.values()), a.jobs,
                                      log=lambda line: print(line, flush=True),
                                      checkpoint=checkpoint)))

    def pair(mean, budget, gib=None, full_kv="auto", zipage_kv="auto"):
        engines = {"fullkv": results[("fullkv", mean, None, gib, full_kv)],
                   "zipage": results[("zipage", mean, budget, gib, zipage_kv)]}
        return to_report(a, cal, engines, workloads[mean][1], len(requests(mean)), budget,
                         gpu_memory_gib=gib, kv_cache_dtype={"fullkv": full_kv,
                                                             "zipage": zipage_kv})

    reports = {f"mean{m:.0f}_budget{b}": pair(m, b) for m in a.sweep_means for b in a.sweep_budgets}
    reports["paper"] = pair(paper_mean, a.budget)
    for gib in GPU_SIZES_GIB:
        reports[f"paper_{gib}GiB"] = pair(paper_mean, a.budget, gib)
    if fp8:
        for name, (full_kv, zipage_kv) in KV_DTYPE_REPORTS.items():
            reports[name] = pair(paper_mean, a.budget, None, full_kv, zipage_kv)
    for name in ("paper", *(f"paper_{gib}GiB" for gib in GPU_SIZES_GIB)):
        print(f"\n== {name}: mean output {paper_mean:.0f} (cap {a.max_output_len}), budget "
              f"{a.budget} / block {a.block_size}")
        print_report(reports[name])
    if fp8:
        print("\n== FP8 KV, paper workload on the whole GPU:")
        print("\n".join(kv_dtype_comparison(reports)))
    curves = {b: [(m, reports[f"mean{m:.0f}_budget{b}"]["speedup"]) for m in a.sweep_means]
              for b in a.sweep_budgets}
    points = [measured_point(path, cal) for path in a.measured]
    points = [p for p in points if p is not None]
    plot_speedup(curves, points, a.plot, plot_title(a.model, cal, len(requests(paper_mean)),
                                                    a.sigma, a.max_output_len))
    print(f"== plot written to {a.plot}")
    bc.write_json(out_json, dict(reports=reports, measured_points=points, curves=curves))
    Path(checkpoint).unlink(missing_ok=True)
    return 0


def plot_title(model: str, cal, num_requests: int, sigma: float, cap: int) -> str:
    gpu = cal.gpu if cal else "FIXED COST MODEL (not measured)"
    return (f"{model}, {gpu}: {num_requests} requests, capped lognormal (sigma {sigma}), cap "
            f"{cap}\nstar: measured run (its own workload); x: the simulator's prediction of it")


def replot(a, cal) -> int:
    """The plot of an earlier --paper run's curves with these measured points; the run's JSON
    gets the points too, so file and plot agree."""
    data = load_json(a.replot)
    if "curves" not in data or "paper" not in data.get("reports", {}):
        raise SystemExit(f"--replot {a.replot}: not the --json of a `simulate --paper` run "
                         f"(no curves / paper report)")
    curves = {int(b): [tuple(p) for p in pts] for b, pts in data["curves"].items()}
    points = [p for p in (measured_point(path, cal) for path in a.measured) if p is not None]
    paper_report = data["reports"]["paper"]
    dist = paper_report["output_len"]
    plot_speedup(curves, points, a.plot, plot_title(
        paper_report["model"], cal, paper_report["num_requests"], dist.get("sigma"),
        dist.get("cap")))
    print(f"== plot written to {a.plot}")
    bc.write_json(a.replot, dict(data, measured_points=points))
    return 0


def load_json(path: str) -> dict:
    import json
    from pathlib import Path
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise SystemExit(f"--replot {path}: {e}") from None


def measured_point(path: str, cal) -> dict | None:
    m = load_report(path)
    if not m.get("speedup"):
        print(f"== {path}: one engine only, no speedup to plot")
        return None
    predicted = predict_report(m, cal.cost, cal.copy_bandwidth_Bps)["speedup"] if cal else None
    pool = max(m["pool_tokens"].values())
    length, x = m["output_len"], mean_length(m["output_len"])  # drawn lengths: at their mean
    text = str(length) if isinstance(length, int) else f"~{x:.0f} (lognormal, cap " \
                                                         f"{length.get('cap')})"
    return dict(path=path, x=x, y=m["speedup"], predicted=predicted,
                label=f"{m['num_requests']}x{text}, budget {m['budget']}/"
                      f"{m['block_size']}, pool {pool // 1000}k")
