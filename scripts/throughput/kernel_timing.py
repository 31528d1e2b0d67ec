"""Timing, the environment and the row format of `bench kernels` (scripts/throughput/kernels.py):
one row per workload, the kernel's median time next to its reference's."""
import os
import subprocess
import time

import torch


def _output(cmd) -> str | None:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout.strip()
    except OSError:  # no git / nvidia-smi
        return None


def environment() -> dict:
    """Hardware, versions, and the commit of the zipage tree whose kernels are timed (run
    this script with another tree on PYTHONPATH to time an older commit's kernels)."""
    import triton

    import zipage
    props = torch.cuda.get_device_properties(0)
    root = os.path.dirname(os.path.dirname(os.path.abspath(zipage.__file__)))
    return dict(gpu=props.name, sms=props.multi_processor_count,
                capability=f"{props.major}.{props.minor}",
                driver=_output(["nvidia-smi", "--id=0", "--query-gpu=driver_version",
                                "--format=csv,noheader"]),
                torch=torch.__version__, cuda=torch.version.cuda, triton=triton.__version__,
                zipage=root,
                commit=_output(["git", "-C", root, "describe", "--always", "--dirty"]))


def bench_us(fn) -> float:
    import triton.testing
    return 1e3 * triton.testing.do_bench(fn, warmup=10, rep=50, return_mode="median")


def wall_us(fn) -> float:
    """One timed call, synchronised (for runs too long or stateful for do_bench)."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e6


SCALE = {"TFLOP/s": 1e6, "GB/s": 1e3}  # amount per microsecond -> unit


def measure(section, workload, unit, amount, kernel, reference=None, check=True, sdpa=None):
    """One row: kernel time, amount (FLOP or bytes) per time in `unit`, the reference's time,
    if check max |kernel - reference| / max |reference|, and sdpa = (amount, fn) if given."""
    row = dict(section=section, workload=workload, unit=unit, time_us=bench_us(kernel))
    row["achieved"] = amount / row["time_us"] / SCALE[unit]
    if reference is not None:
        row["reference_us"] = bench_us(reference)
        if check:
            out, ref = kernel().float(), reference().float()
            row["rel_err"] = ((out - ref).abs().max() / ref.abs().max()).item()
    if sdpa is not None:
        row["sdpa_us"] = bench_us(sdpa[1])
        row["sdpa_achieved"] = sdpa[0] / row["sdpa_us"] / SCALE[unit]
    return row


def paged_cache(ctx_lens, H_kv, D, bs, dtype=torch.bfloat16, spare=4):
    """Random paged K/V, blocks in random order; spare blocks hold NaN (stray reads show)."""
    nblk = [-(-n // bs) for n in ctx_lens]
    NB = sum(nblk) + spare
    k, v = (torch.randn(NB, bs, H_kv, D, device="cuda", dtype=dtype) for _ in range(2))
    perm = torch.randperm(NB, device="cuda").int()
    k[perm[sum(nblk):].long()] = v[perm[sum(nblk):].long()] = float("nan")
    table = torch.full((len(ctx_lens), max(nblk) + 1), -1, dtype=torch.int32, device="cuda")
    starts = [0]
    for s, nb in enumerate(nblk):
        table[s, :nb] = perm[starts[-1]:starts[-1] + nb]
        starts.append(starts[-1] + nb)
    return k, v, table


def print_row(row):
    ref = row.get("reference_us")
    cells = [f"{row['section']:<13}", f"{row['time_us']:10.1f} us",
             f"{row['achieved']:8.1f} {row['unit']:<8}",
             f"ref {ref:10.1f} us ({ref / row['time_us']:6.1f}x)" if ref else " " * 29,
             f"sdpa {row['sdpa_achieved']:7.1f}" if "sdpa_us" in row else " " * 12,
             f"err {row['rel_err']:.1e}" if "rel_err" in row else " " * 11, row["workload"]]
    print("  ".join(cells), flush=True)
    if "stages_ms" in row:
        print(" " * 15 + "stages (ms, all layers): " +
              "  ".join(f"{n} {t}" for n, t in row["stages_ms"].items()), flush=True)
