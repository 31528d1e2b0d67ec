"""Pick the FP8 decode launch for an engine run by energy, from a `bench fp8-kernels --energy`
JSON, by the rule fixed before the run (results/bench/fp8_forecast.md, seventeenth): among
the sweep's fixed rows at one shape whose output passed and which the engine can run, the row
with the fewest mJ per call is chosen if it spends at least `--margin` less than the default;
otherwise the default stays. The search stage's rows are not candidates (chosen on the same
timings they would be judged by), nor V in rows (the engine stores V transposed).

    python -m scripts.bench fp8-energy-choice sweep.json --shape b --env-file fp8_arm.env

The env file is shell: FP8_ARM_ENV (an environment assignment for `env`, or empty) and
FP8_ARM_ARGS (extra `bench long` arguments, or empty), so a job runs the FP8 arm as
`. fp8_arm.env; env $FP8_ARM_ENV python -m scripts.bench long ... $FP8_ARM_ARGS`.
"""
import argparse
import json
import sys

from scripts.arg_types import fraction_below_one
from scripts.throughput.fp8_kernel_summary import (E4M3_LABEL, FLAT_LABEL, OCCUPANCY_LABEL,
                                                   SPLIT_LABEL)
from scripts.throughput.fp8_kernels import GPU_SHAPES
from zipage.kernels.fp8_launch import DECODE_LAUNCH_ENV, launch_text

CANDIDATE_LABELS = ("default", SPLIT_LABEL, E4M3_LABEL, OCCUPANCY_LABEL, FLAT_LABEL)


def candidates(rows: list[dict], shape: str) -> list[dict]:
    """The rows of `shape` the rule may choose: fixed-list labels, V transposed, output
    correct, energy measured."""
    return [r for r in rows
            if r.get("kind") == "fp8" and r.get("workload", "").startswith(f"decode ({shape})")
            and r.get("label") in CANDIDATE_LABELS and r.get("v_path") == "transposed"
            and r.get("correct") and r.get("mj_per_call")]


def engine_setting(row: dict) -> tuple[str, str]:
    """(FP8_ARM_ENV, FP8_ARM_ARGS) that make the engine's FP8 decode run this row's launch."""
    if row["label"] == "default":
        return "", ""
    if row["operand"] == "e4m3":
        return "", "--fp8-decode e4m3"
    return f"{DECODE_LAUNCH_ENV}={launch_text(row)}", ""


def choose(rows: list[dict], shape: str, margin: float) -> tuple[dict, dict, list[dict]]:
    """(chosen row, default row, candidates sorted by mJ per call); raises ValueError when
    the default has no energy or failed its check."""
    pool = sorted(candidates(rows, shape), key=lambda r: r["mj_per_call"])
    default = next((r for r in pool if r["label"] == "default"), None)
    if default is None:
        raise ValueError(f"shape {shape}: no default row with a passed check and an energy "
                         f"reading (run fp8-kernels with --energy on a GPU with NVML)")
    best = pool[0]
    chosen = best if best["mj_per_call"] <= (1 - margin) * default["mj_per_call"] else default
    return chosen, default, pool


def describe(row: dict) -> str:
    extra = "".join(f" {k} {row[k]}" for k in ("maxnreg", "programs_per_sm") if row.get(k))
    return (f"{row['label']}: {row['operand']} tile {row['tile_n']} warps {row['num_warps']} "
            f"stages {row['num_stages']} splits {row.get('splits')}{extra}")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("sweep", help="JSON of `bench fp8-kernels --energy S --json ...`")
    ap.add_argument("--shape", default="b", choices=sorted(GPU_SHAPES),
                    help="the sweep's decode shape")
    # a fraction in [0, 1): below 0, any row spending less energy than the default would win
    ap.add_argument("--margin", type=fraction_below_one, default=0.02,
                    help="the least energy saving over the default that changes the launch")
    ap.add_argument("--env-file", help="write FP8_ARM_ENV and FP8_ARM_ARGS here (shell)")


def read_rows(path: str) -> list[dict]:
    """The decode rows of a `bench fp8-kernels --json` file; ValueError saying what is wrong."""
    try:
        with open(path) as f:
            sweep = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"cannot read {path}: {e}") from e
    if not isinstance(sweep, dict) or not isinstance(sweep.get("decode"), list):
        raise ValueError(f"{path} has no 'decode' rows: not a `bench fp8-kernels --json` file")
    return sweep["decode"]


def main(args) -> int:
    try:
        chosen, default, pool = choose(read_rows(args.sweep), args.shape, args.margin)
    except ValueError as e:
        print(f"fp8-energy-choice: {e}", file=sys.stderr)
        return 1
    print(f"candidates at shape {args.shape} (mJ per call, over the default's; ms per call):")
    for r in pool:
        print(f"  {r['mj_per_call']:9.2f} mJ  {r['mj_per_call'] / default['mj_per_call']:.3f}  "
              f"{r['ms']:.3f} ms  {describe(r)}")
    env, extra = engine_setting(chosen)
    print(f"chosen (margin {args.margin:.0%}): {describe(chosen)}; "
          f"engine: {' '.join(filter(None, (env, extra))) or 'the default launch'}")
    if args.env_file:
        with open(args.env_file, "w") as f:
            f.write(f"FP8_ARM_ENV='{env}'\nFP8_ARM_ARGS='{extra}'\n")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    sys.exit(main(parser.parse_args()))
