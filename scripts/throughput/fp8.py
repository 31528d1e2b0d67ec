"""FP8 vs model-dtype KV cache throughput on the GPU (Qwen3-8B shape, random weights), one
process, four engines in turn, and the ratios printed at the end:

  Full KV  256 requests x (128 prompt -> 512 output), auto vs fp8 (pool: all free memory)
  Full KV long: --full-long-requests x (128 -> --full-long-output-len) on pools of
           --full-long-pool-gib GiB: more requests than the auto pool holds, so the fp8
           pool runs about twice as many at once (the rest wait or are preempted)
  Zipage   budget 2048, block 256, 128 -> --zipage-output-len tokens; both pools of
           --zipage-pool-gib GiB (K, V, scales, global score) filled: as many requests as
           run at once (llm.max_concurrency), so fp8 runs ~1.9x the requests in one wave

    python -m scripts.bench fp8 --out results/bench/fp8_throughput     (~4 min, H200)
    python -m scripts.bench fp8 --cpu-smoke --out /tmp/fp8_smoke       (flow check)

Each engine run is `bench throughput` (same timing rules: generate only, one warm-up
first; HF skipped). Writes <out>.json (every run's full result) and <out>.md (the table).
"""
import argparse
from pathlib import Path

from scripts import common as bc
from scripts.arg_types import positive_int, positive_number
from scripts.throughput import throughput


def _args(extra: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    throughput.add_arguments(p)
    return p.parse_args(extra)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--model", default="qwen3-8b")
    ap.add_argument("--cpu-smoke", action="store_true")
    ap.add_argument("--zipage-pool-gib", type=positive_number, default=16.0)
    ap.add_argument("--zipage-output-len", type=positive_int, default=2560,
                    help="> budget + block - prompt, so every request compresses")
    ap.add_argument("--max-num-seqs", type=positive_int, default=128,
                    help="caps the filled pool (CUDA graphs are captured up to it)")
    ap.add_argument("--full-long-requests", type=positive_int, default=64)
    ap.add_argument("--full-long-output-len", type=positive_int, default=2048)
    ap.add_argument("--full-long-pool-gib", type=positive_number, default=8.0)
    ap.add_argument("--only", choices=["full", "full_long", "zipage"], nargs="+", default=None)
    ap.add_argument("--out", default="results/bench/fp8_throughput",
                    help="writes OUT.json (every run's result) and OUT.md (the table)")


def main(a) -> int:
    smoke = ["--cpu-smoke"] if a.cpu_smoke else []
    full = ["--num-requests", "4" if a.cpu_smoke else "256", "--prompt-len", "16" if a.cpu_smoke
            else "128", "--output-len", "16" if a.cpu_smoke else "512"]
    zipage = ["--budget", "32" if a.cpu_smoke else "2048", "--block-size",
              "16" if a.cpu_smoke else "256", "--num-requests", "0", "--prompt-len",
              "16" if a.cpu_smoke else "128", "--output-len",
              "64" if a.cpu_smoke else str(a.zipage_output_len), "--kv-cache-gib",
              "0.0002" if a.cpu_smoke else str(a.zipage_pool_gib),
              "--max-num-seqs", str(a.max_num_seqs)]
    full_long = ["--num-requests", "4" if a.cpu_smoke else str(a.full_long_requests),
                 "--prompt-len", "16" if a.cpu_smoke else "128", "--output-len",
                 "32" if a.cpu_smoke else str(a.full_long_output_len), "--block-size",
                 "16" if a.cpu_smoke else "256", "--kv-cache-gib",
                 "0.0001" if a.cpu_smoke else str(a.full_long_pool_gib)]
    workloads = {"full": full, "full_long": full_long, "zipage": zipage}
    runs, failed = {}, 0
    for name, flags in workloads.items():
        if a.only and name not in a.only:
            continue
        for kv in ("auto", "fp8"):
            print(f"\n######## {name} kv_cache_dtype={kv}", flush=True)
            args = _args(["--model", a.model, "--skip-hf", "--kv-cache-dtype", kv, *smoke,
                          *flags])
            failed |= throughput.main(args)
            runs[f"{name}/{kv}"] = args.result
    lines = ["| workload | kv_cache_dtype | requests | pool blocks | mean running | preemptions "
             "| output tok/s | wall s | fp8 / auto |", "|---|---|---|---|---|---|---|---|---|"]
    for key, r in runs.items():
        name, kv = key.split("/")
        ours = r["ours"]
        auto = runs.get(f"{name}/auto")
        ratio = ours["output_tokens_per_s"] / auto["ours"]["output_tokens_per_s"] \
            if kv == "fp8" and auto else None
        lines.append(f"| {name} | {kv} | {r['workload']['num_requests']} | "
                     f"{r['engine_options']['num_kv_blocks']} | "
                     f"{ours['stats'].get('mean_running', 0):.1f} | "
                     f"{ours['stats'].get('num_preemptions', 0)} | "
                     f"{ours['output_tokens_per_s']:.0f} | {ours['wall_time_s']:.1f} | "
                     f"{'' if ratio is None else f'{ratio:.2f}x'} |")
    table = "\n".join(lines)
    print("\n== FP8 KV cache throughput\n" + table)
    out = Path(a.out)
    bc.write_json(str(out.with_suffix(".json")), runs)
    out.with_suffix(".md").write_text(f"# FP8 KV cache throughput\n\n`{bc.invocation()}`\n\n"
                                      f"{table}\n")
    return failed

