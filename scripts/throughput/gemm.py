"""The decode step's GEMMs alone, at the model's shapes, with each BLAS choice PyTorch offers.

    python -m scripts.bench gemm --rows 128 256 --backends cublas cublaslt tunableop

Every layer gets its own weights (a step reads them from HBM, not L2), so one "step" is the
four projections of every layer plus the LM head, as the engine runs them. Per backend and
batch size it prints each GEMM's time, TFLOP/s and weight bandwidth, and the whole step's
time measured over a sustained loop (``--seconds``): a GPU that lowers its clock under a
long compute-bound load shows it there, not in the per-GEMM times of a short burst.
Backends: ``cublas`` (PyTorch's default), ``cublaslt`` (torch.backends.cuda.
preferred_blas_library), ``tunableop`` (torch.cuda.tunable: every candidate timed once per
shape, the fastest kept; the outputs are checked against the first backend's).
"""
import time

import torch
import torch.nn.functional as F

from scripts import common as bc
from scripts.arg_types import positive_int, positive_seconds
from zipage.models.presets import SHAPES

BACKENDS = ("cublas", "cublaslt", "tunableop")


def add_arguments(p):
    p.add_argument("--model", default="qwen3-8b", choices=sorted(SHAPES))
    p.add_argument("--rows", type=positive_int, nargs="+", default=[256], help="batch sizes (M)")
    p.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    p.add_argument("--seconds", type=positive_seconds, default=3.0, help="sustained loop per point")
    p.add_argument("--layers", type=positive_int, default=None, help="default: the model's")
    bc.add_common_arguments(p)


def projections(shape: dict) -> dict[str, tuple[int, int]]:
    """name -> (N, K) of one layer's fused projections."""
    h, i, d = shape["hidden_size"], shape["intermediate_size"], shape["head_dim"]
    hq, hkv = shape["num_attention_heads"], shape["num_key_value_heads"]
    return {"qkv": ((hq + 2 * hkv) * d, h), "o": (h, hq * d), "gate_up": (2 * i, h),
            "down": (h, i)}


def set_backend(name: str, tuning_file: str) -> None:
    torch.cuda.tunable.enable(name == "tunableop")
    if name == "tunableop":
        torch.cuda.tunable.tuning_enable(True)
        torch.cuda.tunable.set_filename(tuning_file)
        torch.cuda.tunable.set_max_tuning_duration(200)  # ms per shape
    torch.backends.cuda.preferred_blas_library("cublaslt" if name == "cublaslt" else "cublas")


def step(x: dict, layers: list[dict], head: torch.Tensor) -> torch.Tensor:
    for w in layers:
        for name, weight in w.items():
            F.linear(x[name], weight)
    return F.linear(x["lm_head"], head)


def timed_step(x, layers, head, seconds: float) -> tuple[float, int]:
    """Mean seconds per step over a loop of at least ``seconds``, device kept busy."""
    reps, total = 0, 0.0
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    while total < seconds:
        start.record()
        for _ in range(10):
            step(x, layers, head)
        end.record()
        end.synchronize()
        total += start.elapsed_time(end) / 1e3
        reps += 10
    return total / reps, reps


def per_gemm(x, layers, head) -> dict[str, float]:
    """Mean seconds of each projection over the layers (one pass, events per GEMM: each
    launch is timed alone, so at small M this is launch-bound, an upper bound)."""
    names = list(layers[0]) + ["lm_head"]
    events = {n: [] for n in names}
    for w in layers + [{"lm_head": head}]:
        for name, weight in w.items():
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            F.linear(x[name], weight)
            b.record()
            events[name].append((a, b))
    torch.cuda.synchronize()
    return {n: sum(a.elapsed_time(b) for a, b in ev) / len(ev) / 1e3 for n, ev in events.items()}


def main(a) -> int:
    device = torch.device("cuda")
    shape = SHAPES[a.model]
    num_layers = a.layers or shape["num_hidden_layers"]
    bc.print_header(device, dict(model=a.model, rows=a.rows, backends=a.backends,
                                 seconds=a.seconds, layers=num_layers))
    dims = projections(shape)
    dtype = torch.bfloat16
    gen = torch.Generator(device).manual_seed(a.seed)
    layers = [{n: torch.randn(nk, generator=gen, device=device, dtype=dtype) * 0.02
               for n, nk in dims.items()} for _ in range(num_layers)]
    head = torch.randn(shape["vocab_size"], shape["hidden_size"], generator=gen, device=device,
                       dtype=dtype) * 0.02
    flops = {n: 2 * n_ * k for n, (n_, k) in dims.items()}
    flops["lm_head"] = 2 * head.numel()
    wbytes = {n: n_ * k * 2 for n, (n_, k) in dims.items()}
    wbytes["lm_head"] = head.numel() * 2
    widths = {n: k for n, (_, k) in dims.items()} | {"lm_head": shape["hidden_size"]}
    results, reference = [], {}
    for backend in a.backends:
        set_backend(backend, f"/tmp/zipage_tunableop_{a.model}.csv")
        for m in a.rows:
            inputs = torch.Generator(device).manual_seed(a.seed + m)  # same x per backend
            x = {n: torch.randn(m, k, generator=inputs, device=device, dtype=dtype)
                 for n, k in widths.items()}
            outs = {n: F.linear(x[n], layers[0][n]) for n in dims}  # tunes here if tunableop
            step(x, layers, head)
            if backend == "tunableop":
                torch.cuda.tunable.tuning_enable(False)
            for n, o in outs.items():  # same products as the first backend's, to bf16
                torch.testing.assert_close(o, reference.setdefault(m, outs)[n], rtol=2e-2,
                                           atol=2e-2)
            t_gemm = per_gemm(x, layers, head)
            began = time.time()
            t_step, reps = timed_step(x, layers, head, a.seconds)
            total_flops = num_layers * sum(flops[n] for n in dims) + flops["lm_head"]
            row = dict(backend=backend, rows=m, step_ms=t_step * 1e3, reps=reps,
                       step_tflops=m * total_flops / t_step / 1e12,
                       burst_step_ms=1e3 * (num_layers * sum(t_gemm[n] for n in dims)
                                            + t_gemm["lm_head"]),
                       loop_wall=[began, time.time()],
                       gemm_us={n: t * 1e6 for n, t in t_gemm.items()},
                       gemm_tflops={n: m * flops[n] / t / 1e12 for n, t in t_gemm.items()},
                       gemm_weight_TBps={n: wbytes[n] / t / 1e12 for n, t in t_gemm.items()})
            results.append(row)
            print(f"{backend:<10} M={m:<4} step {row['step_ms']:.2f} ms sustained "
                  f"({row['step_tflops']:.0f} TFLOP/s, {reps} reps), burst sum "
                  f"{row['burst_step_ms']:.2f} ms | " + "; ".join(
                      f"{n} {row['gemm_us'][n]:.0f}us {row['gemm_tflops'][n]:.0f}TF"
                      for n in t_gemm), flush=True)
            if backend == "tunableop":
                torch.cuda.tunable.tuning_enable(True)
    if "tunableop" in a.backends:
        chosen = torch.cuda.tunable.get_results()
        print("== TunableOp choices: " + "; ".join(map(str, chosen)))
    print(f"\n{'backend':<10}{'M':>5}{'step ms':>10}{'TFLOP/s':>9}{'burst ms':>10}")
    for r in results:
        print(f"{r['backend']:<10}{r['rows']:>5}{r['step_ms']:>10.2f}{r['step_tflops']:>9.0f}"
              f"{r['burst_step_ms']:>10.2f}")
    bc.write_json(a.json, dict(results=results))
    return 0
