"""The paper workload and the speedup-vs-output-length sweep (``bench simulate --paper``).

Paper workload (docs/method.md; the published run): 30 AIME24 problems x 32 samples = 960
requests, max_tokens 32,768, budget 2048 / block 256, max_num_seqs 512, one whole GPU. Output
lengths: the capped lognormal of zipage/sim/lengths.py with mean 16,384 (an assumption: the
published run's lengths are not known here; --replay a run's samples.jsonl to use real ones).
The sweep varies the mean (a mean equal to the cap means every sample runs to the cap).
"""
import dataclasses
import hashlib
import json
import multiprocessing
import os
import time
from pathlib import Path

from zipage.sim.lengths import CappedLognormal, Fixed
from zipage.sim.simulate import make_requests, simulate

PAPER = dict(num_prompts=30, samples_per_prompt=32, max_output_len=32768, budget=2048,
             block_size=256, mean_output_len=16384, sigma=0.6, prompt_len=128, max_num_seqs=512)
SWEEP_MEANS = (2048, 4096, 8192, 16384, 24576, 32768)
SWEEP_BUDGETS = (1024, 2048, 4096)
GPU_SIZES_GIB = (40, 80)


def length_distribution(mean: float, cap: int, sigma: float):
    """Capped lognormal; a mean equal to the cap: every sample runs to the cap."""
    if mean > cap:
        raise ValueError(f"mean output length {mean:g} is above the cap {cap}: a capped "
                         f"length cannot average more than its cap (raise the cap)")
    return Fixed(cap) if mean == cap else CappedLognormal(mean, cap, sigma)


def paper_requests(mean: float, cap: int = PAPER["max_output_len"], sigma: float = PAPER["sigma"],
                   num_prompts: int = PAPER["num_prompts"],
                   samples_per_prompt: int = PAPER["samples_per_prompt"],
                   prompt_len: int = PAPER["prompt_len"], seed: int = 0):
    dist = length_distribution(mean, cap, sigma)
    lengths = dist.draw(num_prompts * samples_per_prompt, seed)
    return make_requests(lengths, prompt_len, samples_per_prompt), dist.describe()


def _run(indexed: tuple[int, dict]) -> tuple[int, dict]:
    i, job = indexed
    kwargs = dict(job)
    kwargs.pop("label")
    return i, simulate(**kwargs)


def _plain(x):
    if hasattr(x, "to_dict"):
        return x.to_dict()
    if dataclasses.is_dataclass(x):
        return dataclasses.asdict(x)
    raise TypeError(f"{type(x).__name__} is not JSON")


def job_key(job: dict) -> str:
    """What a job's result depends on (workload, options, cost model, memory, seed), hashed:
    a checkpoint's result counts for a job only if the key matches."""
    payload = {k: v for k, v in job.items() if k != "log_every_s"}
    text = json.dumps(payload, default=_plain, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def read_checkpoint(path: str | None) -> dict[str, dict]:
    """key -> result of the simulations a checkpoint holds (a line cut short by a kill is
    skipped)."""
    if not path or not Path(path).exists():
        return {}
    out = {}
    for line in Path(path).read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        out[entry["key"]] = entry["result"]
    return out


def run_jobs(jobs: list[dict], processes: int = 1, log=None,
             checkpoint: str | None = None) -> list[dict]:
    """simulate(**job) for every job, in parallel processes if asked; results in job order.
    ``log`` gets a line as each one finishes (its ``label``, tok/s, CPU seconds): a sweep
    runs for many minutes. ``checkpoint``: a JSON-lines file that gets each result as it
    finishes; a rerun takes the results it holds for the same jobs (an interrupted sweep
    resumes) and simulates only the others."""
    results, started = [None] * len(jobs), time.perf_counter()
    keys = [job_key(j) for j in jobs] if checkpoint else [None] * len(jobs)
    saved = read_checkpoint(checkpoint)

    def done(i: int, r: dict, resumed: bool = False) -> None:
        results[i] = r
        if checkpoint and not resumed:
            with open(checkpoint, "a") as f:
                f.write(json.dumps({"key": keys[i], "label": jobs[i]["label"], "result": r})
                        + "\n")
        if log is not None:
            n = sum(x is not None for x in results)
            how = (f"from {checkpoint}" if resumed else
                   f"{r['simulation_cpu_s']:.0f} CPU s ({time.perf_counter() - started:.0f} s "
                   f"elapsed)")
            log(f"  [{n}/{len(jobs)}] {jobs[i]['label'] or f'job {i}'}: "
                f"{r['output_tokens_per_s']:,.0f} tok/s simulated, {how}")

    todo = []
    for i, key in enumerate(keys):
        if key in saved:
            done(i, saved[key], resumed=True)
        else:
            todo.append(i)
    if processes <= 1 or len(todo) <= 1:
        for i in todo:
            done(*_run((i, jobs[i])))
        return results
    ctx = multiprocessing.get_context("fork" if os.name == "posix" else "spawn")
    with ctx.Pool(min(processes, len(todo))) as pool:
        for i, r in pool.imap_unordered(_run, [(i, jobs[i]) for i in todo], chunksize=1):
            done(i, r)
    return results


# --paper --kv-cache-dtype fp8: the paper workload (whole GPU) with each engine's KV in each
# dtype; report name -> (Full KV's dtype, Zipage's dtype)
KV_DTYPE_REPORTS = {"paper": ("auto", "auto"), "paper_fp8": ("fp8", "fp8"),
                    "paper_zipage_fp8_vs_fullkv_bf16": ("auto", "fp8")}


def kv_dtype_comparison(reports: dict) -> list[str]:
    """Lines: each engine in each KV dtype (tok/s, mean running, preemptions, pool), then
    the speedups, Zipage FP8 over Full KV bf16 first (the figure FP8 is for)."""
    runs = {}
    for name, (full_dtype, zipage_dtype) in KV_DTYPE_REPORTS.items():
        runs[("Full KV", full_dtype)] = reports[name]["fullkv"]
        runs[("Zipage", zipage_dtype)] = reports[name]["zipage"]
    lines = [f"{'engine':<9}{'KV':<6}{'tok/s':>9}{'mean run':>10}{'preempt':>9}{'pool tok':>10}"]
    for (engine, dtype), e in sorted(runs.items()):
        lines.append(f"{engine:<9}{'bf16' if dtype == 'auto' else dtype:<6}"
                     f"{e['output_tokens_per_s']:>9,.0f}{e['mean_running']:>10.1f}"
                     f"{e['preemptions']:>9}{e['pool_tokens']:>10}")
    ratio = {n: reports[n]["speedup"] for n in KV_DTYPE_REPORTS}
    lines.append(f"Zipage FP8 / Full KV bf16: {ratio['paper_zipage_fp8_vs_fullkv_bf16']:.2f}x "
                 f"(bf16 / bf16: {ratio['paper']:.2f}x; FP8 / FP8: {ratio['paper_fp8']:.2f}x)")
    return lines


def plot_speedup(curves: dict[int, list[tuple[float, float]]], measured: list[dict], path: str,
                 title: str) -> None:
    """curves: budget -> [(mean output length, speedup)]; measured: dicts with x, y,
    predicted (or None) and label."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for budget, points in sorted(curves.items()):
        xs, ys = zip(*sorted(points))
        ax.plot(xs, ys, marker="o", label=f"simulated, budget {budget}")
    for i, m in enumerate(measured):
        color = f"C{5 + i % 5}"
        ax.scatter([m["x"]], [m["y"]], marker="*", s=140, zorder=3, color=color,
                   label=f"measured: {m['label']}")
        if m.get("predicted") is not None:
            ax.scatter([m["x"]], [m["predicted"]], marker="x", s=60, zorder=3, color=color)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xscale("log", base=2)
    ticks = {x for points in curves.values() for x, _ in points}
    # a measured length near a curve's (a drawn mean) gets no tick of its own: labels collide
    ticks = sorted(ticks | {m["x"] for m in measured
                            if all(abs(m["x"] / t - 1) > 0.15 for t in ticks)})
    ax.set_xticks(ticks, [f"{x / 1024:.3g}k" if x >= 1024 else f"{x:g}" for x in ticks])
    ax.minorticks_off()
    ax.set_xlabel("mean output length (tokens)")
    ax.set_ylabel("speedup: Zipage / Full KV output tok/s")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
