"""FP8 paged attention on the GPU: decode variants against the FP8 byte roofline, next to the
bf16 kernel, plus FP8 prefill and the compression score kernel, bf16 vs fp8 (those rows:
fp8_prefill_score.py, with the score's candidate launches).

    python -m scripts.bench fp8-kernels [--json OUT] [--shapes a,b] [--full-grid]   (~2-3 min)
    python -m scripts.bench fp8-kernels --cpu-smoke      (tiny shapes, Triton interpreter)
    python -m scripts.bench fp8-kernels --energy 1       (also mJ per call: energy.py)
    python -m scripts.bench fp8-kernels --shapes b --energy 1 --fixed-only   (the candidates
        of bench fp8-energy-choice alone)

Roofline: the bytes a decode step must read (K and V of every context token and, for FP8,
their float32 scales) over the copy bandwidth measured first (a 2 GiB device-to-device copy,
bytes read + written). Workloads, one Qwen3-8B layer (H_q 32, H_kv 8, D 128, block 256):
decode (a) 512 rows x 2048 keys, (b) 64 rows x 16384 keys; K/V quantised from random
normals with per-token magnitudes, blocks in random order in a pool of exactly the blocks
read (GBs, far beyond L2). Each variant: median of triton.testing.do_bench, output checked
once against the PyTorch reference (max |error| / max |reference|).
The default is the flat kernel (fp8_decode_flat.py); the split kernel it replaced
(fp8_launch.FP8_DECODE_SPLIT) is timed next to it. V paths: the engine's FP8 V cache is
stored transposed per block (fp8.transposed_v_view), the default; V in rows, read as bytes
or made in registers (split kernel only), is timed next to it; the search runs the default
V path and kernel (the split kernel for e4m3). Operand e4m3: the decode
with e4m3 MMAs on the cache bytes (fp8_decode_mma.py), timed at fp8_launch.E4M3_DECODE next
to the default and in the search (V transposed only). Occupancy rows: the launches of
fp8_launch.FP8_DECODE_OCCUPANCY (a register cap, or fewer warps per program: 4 to 8
programs per SM instead of 3, split kernel), timed next to the default. Flat rows: the flat
kernel's other launches (fp8_launch.FP8_DECODE_FLAT: 1 to 4 programs per SM, each one loop
over the tiles of several (request, KV head, split) items).
Split counts: what the call itself uses (paged_decode.plan_decode: the flat kernel's rule for
its rows, the split kernel's for the others), unless a row sets one.
Search (default): operand x tile_n x num_warps at 3 stages and the default split count, then
num_stages, then num_splits for the best; --full-grid times the whole product (slow).
The best variant per shape is what fp8_launch.FP8_DECODE should hold.
"""
import argparse
import itertools
import json
import sys

import torch

from scripts.arg_types import seconds_or_zero
from scripts.throughput.fp8_kernel_parts import (bench_ms, decode_query, decode_reference,
                                               open_bench, paged_pool, rel_err)
from scripts.throughput.fp8_kernel_summary import (E4M3_LABEL, FLAT_LABEL, MAX_REL_ERR,
                                                   OCCUPANCY_LABEL, SPLIT_LABEL,
                                                   print_row, summary)
from scripts.throughput.energy import EnergyCounter, energy_per_call
from scripts.throughput.fp8_prefill_score import other_rows

OPERANDS = {"f16": torch.float16, "bf16": torch.bfloat16, "e4m3": torch.float8_e4m3fn}
GRID = dict(operand=("f16", "bf16", "e4m3"), tile_n=(64, 128, 256), num_warps=(4, 8),
            num_stages=(2, 3, 4), num_splits=(None, 1, 2, 4, 8),  # None: default_num_splits
            v_path=("transposed", "bytes", "registers"))
GPU_SHAPES = {"a": (512, 2048), "b": (64, 16384)}  # rows x context
GPU = dict(H_q=32, H_kv=8, D=128, bs=256)
SMOKE = dict(H_q=8, H_kv=2, D=32, bs=16)
SMOKE_SHAPES = {"a": (3, 48)}


def decode_rows(name, rows, ctx, dims, copy, args, device, energy_counter=None):
    from zipage.kernels.fp8 import copy_to_transposed_v
    from zipage.kernels.fp8_launch import (E4M3_DECODE, FP8_DECODE, FP8_DECODE_FLAT,
                                           FP8_DECODE_OCCUPANCY, FP8_DECODE_SPLIT)
    from zipage.kernels.paged_decode import decode_scratch, paged_decode_attention, plan_decode
    H_q, H_kv, D, bs = dims["H_q"], dims["H_kv"], dims["D"], dims["bs"]
    q, lens = decode_query(rows, ctx, dims, device)
    workload = f"decode ({name}) {rows} rows x {ctx} keys, H {H_q}/{H_kv}, D {D}, block {bs}"
    out = torch.empty_like(q)
    results, seen = [], {}
    transposed = []  # the FP8 V cache in the engine's layout (fp8.transposed_v_view)

    def run(kind, cache, variant):
        key = (kind, *sorted((k_, str(v_)) for k_, v_ in variant.items() if k_ != "label"))
        if key in seen:  # the search meets a variant again: time it once
            return seen[key]
        k, v, ks, vs, table = cache
        kw = {key: val for key, val in variant.items() if key not in ("num_splits", "label")}
        if "operand" in kw:
            kw["fp8_operand"] = OPERANDS[kw.pop("operand")]
        if "v_path" in kw:  # the engine's V stored transposed, or V in rows (bytes / registers)
            v_path = kw.pop("v_path")
            if v_path == "transposed":
                k, v = cache[0], transposed[0]
            else:
                kw["fp8_v_in_registers"] = v_path == "registers"
        row = dict(workload=workload, kind=kind, **variant,
                   splits=variant.get("num_splits") or 0)
        try:  # the split count the call will use (each kernel's own rule unless the row sets one)
            splits = row["splits"] = plan_decode(q, k, v, table, ks, vs,
                                                 variant.get("num_splits"), **kw).num_splits
            scratch = decode_scratch(rows, H_q, D, splits, q.device)

            def call():
                return paged_decode_attention(q, k, v, table, lens, D ** -0.5, splits, out,
                                              scratch, k_scale=ks, v_scale=vs, **kw)
            row["ms"] = bench_ms(call, args.cpu_smoke)
            if args.energy:  # the row's cost on a power-capped GPU (energy.py)
                row.update(energy_per_call(call, energy_counter, args.energy,
                                           torch.cuda.synchronize) or {})
            out.fill_(float("nan"))  # a row the variant does not write shows as NaN
            call()
            row["rel_err"] = rel_err(out, reference[kind])
            row["correct"] = bool(row["rel_err"] <= MAX_REL_ERR)  # False for NaN too
        except Exception as exc:  # e.g. out of shared memory: report, go on
            row["error"] = f"{type(exc).__name__}: {str(exc)[:120]}"
        per_token = 2 * H_kv * ((D + 4) if kind == "fp8" else 2 * D)
        row["bytes"] = rows * ctx * per_token
        if "ms" in row:
            row["gbps"] = row["bytes"] / row["ms"] / 1e6
            row["pct_roofline"] = 100 * row["gbps"] / copy
        print_row(row)
        results.append(row)
        seen[key] = row
        return row

    reference = {}
    bf16 = paged_pool(rows, ctx, H_kv, D, bs, False, device)
    reference["bf16"] = decode_reference(q, *bf16[:2], bf16[4], lens, None, None)
    run("bf16", bf16, {})
    del bf16
    fp8 = paged_pool(rows, ctx, H_kv, D, bs, True, device)
    reference["fp8"] = decode_reference(q, *fp8[:2], fp8[4], lens, *fp8[2:4])
    transposed.append(copy_to_transposed_v(fp8[1]))
    op_name = {v: k for k, v in OPERANDS.items()}[FP8_DECODE.operand]
    default = dict(operand=op_name, tile_n=FP8_DECODE.tile_n, num_warps=FP8_DECODE.num_warps,
                   num_stages=FP8_DECODE.num_stages, num_splits=None, v_path="transposed",
                   programs_per_sm=FP8_DECODE.programs_per_sm or 0)
    split = dict(default, tile_n=FP8_DECODE_SPLIT.tile_n, num_warps=FP8_DECODE_SPLIT.num_warps,
                 num_stages=FP8_DECODE_SPLIT.num_stages, programs_per_sm=0, label=SPLIT_LABEL)
    e4m3 = dict(default, operand="e4m3", tile_n=E4M3_DECODE.tile_n, programs_per_sm=0,
                num_warps=E4M3_DECODE.num_warps, num_stages=E4M3_DECODE.num_stages)
    occupancy = [dict(default, tile_n=o.tile_n, num_warps=o.num_warps, num_stages=o.num_stages,
                      maxnreg=o.maxnreg, programs_per_sm=0, label=OCCUPANCY_LABEL)
                 for o in FP8_DECODE_OCCUPANCY]
    flat = [dict(default, tile_n=o.tile_n, num_warps=o.num_warps, num_stages=o.num_stages,
                 programs_per_sm=o.programs_per_sm, label=FLAT_LABEL) for o in FP8_DECODE_FLAT]
    if args.cpu_smoke:
        run("fp8", fp8, dict(default, tile_n=16, label="default"))
        run("fp8", fp8, dict(split, tile_n=16, num_splits=2))
        run("fp8", fp8, dict(e4m3, tile_n=32, num_splits=2, label=E4M3_LABEL))
        run("fp8", fp8, dict(occupancy[0], tile_n=16, num_splits=2))
        run("fp8", fp8, dict(flat[0], tile_n=16))
        return results
    run("fp8", fp8, dict(default, label="default"))
    run("fp8", fp8, dict(split))
    run("fp8", fp8, dict(e4m3, label=E4M3_LABEL))
    for variant in occupancy + flat:
        run("fp8", fp8, variant)
    run("fp8", fp8, dict(split, v_path="bytes", label="V in rows, read as bytes"))
    run("fp8", fp8, dict(split, v_path="registers", label="V in rows, made in registers"))
    if args.fixed_only:
        return results
    if args.full_grid:
        for combo in itertools.product(*GRID.values()):
            variant = dict(zip(GRID, combo))
            if variant["operand"] != "e4m3" or variant["v_path"] == "transposed":
                run("fp8", fp8, variant)
        return results

    def best(rows_):
        ok = [r for r in rows_ if r.get("correct")]
        return min(ok, key=lambda r: r["ms"]) if ok else None

    stage = [run("fp8", fp8, dict(default, operand=op, tile_n=tn, num_warps=w, num_stages=3,
                                  programs_per_sm=0 if op == "e4m3" else
                                  default["programs_per_sm"]))
             for op, tn, w in itertools.product(GRID["operand"], GRID["tile_n"],
                                                GRID["num_warps"])]
    if best(stage) is None:
        return results
    pick = {key: best(stage)[key]
            for key in ("operand", "tile_n", "num_warps", "v_path", "programs_per_sm")}
    stage += [run("fp8", fp8, dict(pick, num_stages=st, num_splits=None))
              for st in GRID["num_stages"] if st != 3]
    pick["num_stages"] = best(stage)["num_stages"]
    for sp in GRID["num_splits"][1:]:
        run("fp8", fp8, dict(pick, num_splits=sp))
    return results


def shape_names(text: str) -> list:
    """--shapes: a comma list of GPU_SHAPES' names, at least one (an empty list timed nothing)."""
    names = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in names if s not in GPU_SHAPES]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"choose from {sorted(GPU_SHAPES)}, got {text!r}")
    return names


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--json", metavar="OUT", help="write every row, the environment and the "
                    "copy bandwidth here")
    ap.add_argument("--shapes", type=shape_names, default="a,b",
                    help="decode shapes: a (512 x 2048), b (64 x 16384)")
    stage = ap.add_mutually_exclusive_group()
    stage.add_argument("--full-grid", action="store_true",
                       help="time every combination of the grid (far over 3 minutes)")
    stage.add_argument("--fixed-only", action="store_true",
                       help="the decode's fixed rows only (default, split, e4m3, occupancy, "
                            "flat, V in rows): no search stage, no prefill or score rows")
    ap.add_argument("--cpu-smoke", action="store_true",
                    help="tiny shapes in the Triton interpreter, one variant each (a test)")
    ap.add_argument("--energy", type=seconds_or_zero, default=0.0, metavar="S",
                    help="also loop each decode variant S seconds and report mJ per call, "
                         "mean W and the SM clock (NVML's energy counter; GPU only)")


def main(args) -> int:
    opened = open_bench("fp8-kernels", args.cpu_smoke)
    if opened is None:
        return 2
    device, env, copy = opened
    energy_counter = None
    if args.energy:
        energy_counter = EnergyCounter()
        if args.cpu_smoke or not energy_counter.available:
            print("--energy: NVML's energy counter is not available here; rows have no "
                  "energy", file=sys.stderr)
            args.energy = 0.0
    shapes = SMOKE_SHAPES if args.cpu_smoke else {s: GPU_SHAPES[s] for s in args.shapes}
    dims = SMOKE if args.cpu_smoke else GPU
    decode = []
    for name, (rows, ctx) in shapes.items():
        print(f"decode ({name}) {rows} rows x {ctx} keys, H {dims['H_q']}/{dims['H_kv']}, "
              f"D {dims['D']}, block {dims['bs']}", flush=True)
        decode += decode_rows(name, rows, ctx, dims, copy, args, device, energy_counter)
        if device == "cuda":
            torch.cuda.empty_cache()
    other = [] if args.fixed_only else other_rows(dims, args, device)
    best = summary(decode, shapes)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(environment=env, copy_gbps=copy, grid=GRID, decode=decode,
                           best=best, other=other), f, indent=1, default=str)
    wrong = [r for r in decode if "rel_err" in r and not r["correct"]]
    unchecked = [r for r in decode if "ms" in r and "rel_err" not in r]  # the check raised
    if wrong:
        print(f"{len(wrong)} decode variant(s) gave wrong output (error over {MAX_REL_ERR:g}): "
              "a kernel bug, see the WRONG OUTPUT rows", file=sys.stderr)
    if unchecked:
        print(f"{len(unchecked)} decode variant(s) were timed but their output check raised: "
              "see their rows", file=sys.stderr)
    return 1 if wrong or unchecked else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    sys.exit(main(parser.parse_args()))
