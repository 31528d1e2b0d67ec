"""Throughput predicted by the real scheduler on a step-cost model (zipage/sim): the engine's
own Scheduler and BlockManager drive a SimRunner that advances a virtual clock.

    python -m scripts.bench simulate --output-len 8192 --num-requests 128        # a workload
    python -m scripts.bench simulate --mean-output-len 16384 --samples-per-prompt 32
    python -m scripts.bench simulate --replay outputs/.../samples.jsonl --budget 1024
    python -m scripts.bench simulate --validate R.json --trace R_trace.json.gz  # measured run
    python -m scripts.bench simulate --paper --measured results/bench/*.json --jobs 2
    python -m scripts.bench simulate --kv-cache-dtype fp8 --decode-speedup 1.15   # a what-if

The cost model comes from --cost (a `bench calibrate` file; default: the one file
results/bench/step_cost_*_<model>.json, or the H200's where several cards are calibrated) or
--fixed-cost (stated coefficients, no measurement: the numbers are then no prediction).
Pool: --kv-cache-tokens, or the whole device (--gpu-memory-gib; default the calibrated GPU)
sized by the engine's own memory arithmetic with the calibrated non-KV bytes.
--decode-speedup (and --decode-programs-per-sm) change the calibrated decode cost of the
simulated KV dtype: what a faster decode kernel would give, labelled WHAT-IF in the table
and the JSON, never a prediction.
"""
import glob
import os

from scripts import common as bc
from scripts.arg_types import positive_int, positive_number, temperature
from scripts.sim.jobs import job, print_report, to_report
from zipage.sim import report as rp
from zipage.sim.calibration_file import Calibration
from zipage.sim.lengths import Replay, read_samples
from zipage.sim.paper import PAPER, SWEEP_BUDGETS, SWEEP_MEANS, length_distribution, run_jobs
from zipage.sim.simulate import make_requests, replay_requests
from zipage.sim.validate import load_report, mark_samples, markdown_table, predict_report, \
    trace_breakdown, describe_lengths

ENGINE_KEYS = {"full": "fullkv", "zipage": "zipage"}
REFERENCE_GPU = "h200"  # the card the project's claims are measured on


def add_arguments(p):
    p.add_argument("--model", default="qwen3-8b", help="preset shape or checkpoint folder")
    p.add_argument("--cost", metavar="CALIBRATION", help="step_cost_*.json of `bench calibrate`")
    p.add_argument("--fixed-cost", action="store_true", help="stated coefficients, no measurement")
    p.add_argument("--engines", nargs="+", default=["full", "zipage"], choices=list(ENGINE_KEYS))
    p.add_argument("--num-requests", type=positive_int, default=960)
    p.add_argument("--samples-per-prompt", type=positive_int, default=1,
                   help="requests sharing a prompt")
    p.add_argument("--prompt-len", type=positive_int, default=128)
    lengths = p.add_mutually_exclusive_group()
    lengths.add_argument("--output-len", type=positive_int,
                         help="every request generates exactly this")
    lengths.add_argument("--mean-output-len", type=positive_number,
                         help="capped lognormal with this mean")
    lengths.add_argument("--replay", metavar="SAMPLES_JSONL", help="a harness run's samples")
    p.add_argument("--max-output-len", type=positive_int, default=PAPER["max_output_len"],
                   help="the cap")
    p.add_argument("--sigma", type=positive_number, default=PAPER["sigma"], help="lognormal sigma")
    p.add_argument("--budget", type=positive_int, default=PAPER["budget"])
    p.add_argument("--block-size", type=positive_int, default=PAPER["block_size"])
    pool = p.add_mutually_exclusive_group()
    pool.add_argument("--kv-cache-tokens", type=positive_int)
    pool.add_argument("--gpu-memory-gib", type=positive_number,
                      help="device memory (default: calibrated)")
    p.add_argument("--max-num-seqs", type=positive_int, default=PAPER["max_num_seqs"])
    p.add_argument("--kv-cache-dtype", default="auto", choices=("auto", "fp8"),
                   help="KV cache of the simulated engines: its configs in the calibration and "
                        "its pool size; with --paper, fp8 adds the FP8 paper runs next to bf16")
    p.add_argument("--max-num-batched-tokens", type=positive_int, default=8192)
    bc.add_async_argument(p, "the simulated engine schedules step N+1 while step N runs")
    bc.add_scoring_arguments(p)
    p.add_argument("--temperature", type=temperature, default=0.6)
    bc.add_common_arguments(p)
    p.add_argument("--validate", nargs="+", metavar="REPORT", help="measured `long --json` runs")
    p.add_argument("--trace", nargs="+", metavar="TRACE",
                   help="their traces (same order; - for a run without one)")
    p.add_argument("--markdown", metavar="PATH", help="write the validation table here")
    p.add_argument("--paper", action="store_true",
                   help="paper workload (mean: --mean-output-len, default 16384), GPU sizes, "
                        "sweep, plot")
    p.add_argument("--sweep-means", type=positive_number, nargs="+", default=list(SWEEP_MEANS))
    p.add_argument("--sweep-budgets", type=positive_int, nargs="+", default=list(SWEEP_BUDGETS))
    p.add_argument("--measured", nargs="*", default=[], metavar="REPORT", help="plot these")
    p.add_argument("--replot", metavar="SWEEP_JSON",
                   help="redraw --plot from the curves of an earlier --paper run (its --json) "
                        "with the --measured points (predicted with --cost); no new sweep")
    p.add_argument("--plot", default="results/bench/speedup_vs_length.png")
    p.add_argument("--jobs", type=positive_int, default=1,
                   help="simulations run in parallel processes")
    p.add_argument("--decode-speedup", type=positive_number, metavar="X",
                   help="what-if: the simulated KV dtype's decode reads its KV X times faster "
                        "than calibrated (results are labelled, not predictions)")
    p.add_argument("--decode-programs-per-sm", type=positive_int, metavar="N",
                   help="what-if, with --decode-speedup: N decode programs resident per SM")


CHECKOUT_BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "results", "bench")  # the calibrations this checkout ships


def default_calibration(model: str, folder: str | None = None) -> tuple[str, list[str]]:
    """(the calibration simulate uses without --cost, the other ones for `model`): the only
    step_cost_*_<model>.json in `folder`, else the reference card's (REFERENCE_GPU). Without
    `folder`: ./results/bench if it holds one for `model`, else the checkout's (a command run
    from another directory still finds the calibrations that come with the code)."""
    if folder is None:
        here = "results/bench"
        folder = here if glob.glob(f"{here}/step_cost_*_{model}.json") else CHECKOUT_BENCH
    paths = sorted(glob.glob(f"{folder}/step_cost_*_{model}.json"))
    reference = f"{folder}/step_cost_{REFERENCE_GPU}_{model}.json"
    chosen = paths[0] if len(paths) == 1 else reference if reference in paths else None
    if chosen is None:
        raise SystemExit(f"no single calibration for {model} in {folder} "
                         f"({paths or 'none found'}): run `python -m scripts.bench calibrate` on "
                         f"the GPU, pass --cost, or --fixed-cost for an uncalibrated run")
    return chosen, [p for p in paths if p != chosen]


def calibration(a) -> Calibration | None:
    if a.fixed_cost:
        if a.decode_speedup is not None or a.decode_programs_per_sm is not None:
            raise SystemExit("--decode-speedup needs a calibration, not --fixed-cost")
        print("== FIXED COST MODEL (not measured): these numbers are not predictions")
        return None
    path, others = (a.cost, []) if a.cost else default_calibration(a.model)
    cal = Calibration(path)
    also = f"; also calibrated: {', '.join(others)} (--cost picks one)" if others else ""
    print(f"== cost model: {cal.path} ({cal.gpu}, {cal.model}){also}")
    if a.decode_programs_per_sm is not None and a.decode_speedup is None:
        raise SystemExit("--decode-programs-per-sm is a what-if of --decode-speedup: give both")
    if a.decode_speedup is not None:
        if a.validate:
            raise SystemExit("--decode-speedup changes the cost model: not for --validate")
        try:
            print("== " + cal.assume_faster_decode(a.kv_cache_dtype, a.decode_speedup,
                                                   a.decode_programs_per_sm))
        except ValueError as e:
            raise SystemExit(f"--decode-speedup: {e}") from None
    return cal


def workload(a):
    """(requests, output_len for the report)."""
    if a.replay:
        requests = replay_requests(read_samples(a.replay))
        return requests, Replay(a.replay).describe()
    if a.mean_output_len is not None:
        try:
            dist = length_distribution(a.mean_output_len, a.max_output_len, a.sigma)
        except ValueError as e:
            raise SystemExit(f"--mean-output-len / --max-output-len / --sigma: {e}") from None
        lengths = dist.draw(a.num_requests, a.seed)
        return make_requests(lengths, a.prompt_len, a.samples_per_prompt), dist.describe()
    n = a.output_len or a.max_output_len
    a.max_output_len = n
    return make_requests([n] * a.num_requests, a.prompt_len, a.samples_per_prompt), n


def run_workload(a, cal) -> int:
    requests, output_len = workload(a)
    names = [ENGINE_KEYS[e] for e in a.engines]
    results = run_jobs([job(a, cal, n, requests) for n in names], a.jobs)
    report = to_report(a, cal, dict(zip(names, results)), output_len, len(requests))
    print_report(report)
    bc.write_json(a.json, report)
    return 0


def validate(a, cal) -> int:
    if cal is None:
        raise SystemExit("--validate needs a calibration (--cost), not --fixed-cost")
    traces = a.trace or []
    if traces and len(traces) != len(a.validate):
        raise SystemExit("--trace: give one trace per --validate report, in the same order")
    runs, out = [], []
    for i, path in enumerate(a.validate):
        measured = load_report(path)
        predicted = predict_report(measured, cal.cost, cal.copy_bandwidth_Bps)
        rows = mark_samples(rp.compare(measured, predicted), measured, cal.cost)
        print(f"\n== {path}: {measured['num_requests']} x ({measured['prompt_len']} -> "
              f"{describe_lengths(measured['output_len'])}), budget {measured['budget']} / block "
              f"{measured['block_size']}, pool {measured['pool_tokens']}, "
              f"{'async' if measured['async_scheduling'] else 'sync'}; "
              + ", ".join(f"{r['engine']} {r['sample']}" for r in rows) + "\n"
              + rp.format_comparison(rows))
        if traces and traces[i] != "-":  # "-": this run has no trace
            lines = trace_breakdown(traces[i], predicted, cal.cost, measured["block_size"])
            print("\n".join(lines))
        runs.append((path, rows))
        out.append(dict(measured=path, rows=rows, predicted=predicted))
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(f"Cost model: `{cal.path}`. in-sample: the cost model was fitted to this "
                    f"run's trace; held-out: it was not.\n\n" + markdown_table(runs))
        print(f"== table written to {a.markdown}")
    bc.write_json(a.json, dict(validation=out, cost_model=cal.path,
                               tolerance=rp.TOLERANCE))
    return 0 if all(r["within_tolerance"] for _, rows in runs for r in rows) else 1


def main(a) -> int:
    cal = calibration(a)
    if a.validate:
        return validate(a, cal)
    if a.paper or a.replot:
        from scripts.sim.paper import paper, replot
        return replot(a, cal) if a.replot else paper(a, cal)
    return run_workload(a, cal)
