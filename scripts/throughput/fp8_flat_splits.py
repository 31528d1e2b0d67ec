"""The flat FP8 decode kernel's split count, on shapes the fp8-kernels sweep does not tune on.

    python -m scripts.bench fp8-flat-splits [--json OUT] [--launches 128x4,256x8]   (~1 min)
    python -m scripts.bench fp8-flat-splits --cpu-smoke    (tiny shapes, Triton interpreter)

Why: the sweep (fp8_kernels.py) at its two shapes read fewer splits as faster at every
launch, while fp8_decode_flat.flat_num_splits balances the busiest program's share and picks
2-3 there. Two rules are timed next to every split count 1-8, per launch and shape:
`balance` (flat_num_splits, what the engine runs) and `fill` (the fewest splits that give
every resident program an item: ceil(programs / (rows x KV heads)), at most 8 and the
tiles). Launches: NxW = tile_n x num_warps at 2 stages and 3 programs per SM (shared memory
may allow fewer: the row says how many ran). Shapes (rows x context, Qwen3-8B's heads,
block 256): the H100's Zipage operating point (296 x 2304) and others from 256 x 4096 down
to one row of 32k. % of the FP8 byte roofline as in fp8_kernels.py.
"""
import argparse
import json
import sys

import torch

from scripts.throughput.fp8_kernel_parts import (bench_ms, decode_query, decode_reference,
                                               open_bench, paged_pool, rel_err)
from scripts.throughput.fp8_kernel_summary import MAX_REL_ERR

SHAPES = ((296, 2304), (256, 4096), (128, 8192), (32, 16384), (8, 32768), (1, 32768))
SMOKE_SHAPES = ((3, 48), (1, 80))
GPU = dict(H_q=32, H_kv=8, D=128, bs=256)
SMOKE = dict(H_q=8, H_kv=2, D=32, bs=16)
MAX_SPLITS = 8


def fill_splits(rows: int, kv_heads: int, programs: int, max_tiles: int) -> int:
    return max(1, min(MAX_SPLITS, max_tiles, -(-programs // (rows * kv_heads))))


def shape_rows(rows, ctx, dims, launches, copy, device, cpu):
    from zipage.kernels.fp8 import copy_to_transposed_v
    from zipage.kernels.paged_decode import (_device_sms, decode_scratch,
                                             paged_decode_attention, plan_decode)
    H_q, H_kv, D, bs = dims["H_q"], dims["H_kv"], dims["D"], dims["bs"]
    q, lens = decode_query(rows, ctx, dims, device)
    k, v, ks, vs, table = paged_pool(rows, ctx, H_kv, D, bs, True, device)
    ref = decode_reference(q, k, v, table, lens, ks, vs)
    v = copy_to_transposed_v(v)
    out = torch.empty_like(q)
    nbytes = rows * ctx * 2 * H_kv * (D + 4)
    results = []
    for name, (tile, warps) in launches.items():
        kw = dict(tile_n=tile, num_warps=warps, num_stages=2, programs_per_sm=3)
        plan = plan_decode(q, k, v, table, ks, vs, **kw)  # its splits: flat_num_splits
        pps = plan.launch.programs_per_sm
        max_tiles = -(-table.shape[1] * bs // tile)
        rules = dict(balance=plan.num_splits,
                     fill=fill_splits(rows, H_kv, _device_sms(q.device) * pps, max_tiles))
        for splits in sorted(set(range(1, MAX_SPLITS + 1)) | set(rules.values())):
            if splits > max_tiles:
                continue
            scratch = decode_scratch(rows, H_q, D, splits, q.device)

            def call():
                return paged_decode_attention(q, k, v, table, lens, D ** -0.5, splits, out,
                                              scratch, k_scale=ks, v_scale=vs, **kw)
            ms = bench_ms(call, cpu)
            out.fill_(float("nan"))
            call()
            row = dict(rows=rows, ctx=ctx, launch=name, programs_per_sm=pps, splits=splits,
                       rules=[r for r, s in rules.items() if s == splits], ms=ms,
                       pct_roofline=100 * nbytes / ms / 1e6 / copy, rel_err=rel_err(out, ref))
            row["correct"] = bool(row["rel_err"] <= MAX_REL_ERR)  # False for NaN too
            print(f"  {rows:4d} x {ctx:5d}  {name:6s} {pps}/SM  splits {splits}  "
                  f"{row['ms']:7.3f} ms  {row['pct_roofline']:5.1f}%  err {row['rel_err']:.1e}"
                  f"  {' '.join(row['rules'])}", flush=True)
            results.append(row)
    return results


def summary(results) -> list[str]:
    """Per shape and launch: the best split count with a right output, and each rule's
    speed relative to it (a rule whose output was wrong reads "wrong")."""
    lines = ["rows x ctx    launch  best splits  best %   balance: splits, vs best   "
             "fill: splits, vs best"]
    keys = sorted({(r["rows"], r["ctx"], r["launch"]) for r in results},
                  key=lambda t: (-t[0], t[2]))
    for rows, ctx, launch in keys:
        group = [r for r in results if (r["rows"], r["ctx"], r["launch"]) == (rows, ctx, launch)]
        right = [r for r in group if r["correct"]]
        if not right:
            lines.append(f"{rows:4d} x {ctx:5d}  {launch:6s}  every output wrong")
            continue
        best = min(right, key=lambda r: r["ms"])
        cols = []
        for rule in ("balance", "fill"):
            r = next(r for r in group if rule in r["rules"])
            cols.append(f"{r['splits']}, " + (f"{best['ms'] / r['ms']:.3f}" if r["correct"]
                                               else "wrong"))
        lines.append(f"{rows:4d} x {ctx:5d}  {launch:6s}  {best['splits']:11d}  "
                     f"{best['pct_roofline']:5.1f}%   {cols[0]:24s} {cols[1]}")
    return lines


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--json", metavar="OUT", help="write every row and the environment here")
    ap.add_argument("--launches", default="128x4,256x8",
                    help="tile_n x num_warps of each flat launch (2 stages, 3 per SM)")
    ap.add_argument("--cpu-smoke", action="store_true",
                    help="tiny shapes in the Triton interpreter (a flow check, not a timing)")


def main(args) -> int:
    try:
        launches = {t: tuple(int(x) for x in t.split("x")) for t in args.launches.split(",")}
        assert all(len(v) == 2 for v in launches.values())
    except (ValueError, AssertionError):
        print(f"--launches: TILExWARPS,... (e.g. 128x4,256x8), got {args.launches!r}",
              file=sys.stderr)
        return 2
    if args.cpu_smoke:  # the interpreter's tiles: 16 keys
        launches = {name: (min(t, 16), w) for name, (t, w) in launches.items()}
    opened = open_bench("fp8-flat-splits", args.cpu_smoke)
    if opened is None:
        return 2
    device, env, copy = opened
    results = []
    for rows, ctx in SMOKE_SHAPES if args.cpu_smoke else SHAPES:
        results += shape_rows(rows, ctx, SMOKE if args.cpu_smoke else GPU, launches, copy,
                              device, args.cpu_smoke)
        if device == "cuda":
            torch.cuda.empty_cache()
    print()
    print("\n".join(summary(results)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(environment=env, copy_gbps=copy, rows=results), f, indent=1)
    return 0
