"""Check the compression kernels on CUDA against their PyTorch references, then time them.

    python scripts/gpu_check_compression.py              # H200, Qwen3-8B shapes, bf16 (~1 min)
    python scripts/gpu_check_compression.py --cpu-smoke  # tiny shapes, Triton interpreter on CPU

Checks (2 layers, 64 requests mixing every compaction aliasing case, b = 256 and 16): each
kernel vs its reference, then whole-pipeline keep agreement. Times every stage and the whole
pipeline over 36 layers for 64 requests of 2304 tokens (budget 2048). Exits 1 on a failure.
"""
import argparse
import os
import sys
import time
import traceback
from pathlib import Path

ARGS = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ARGS.add_argument("--cpu-smoke", action="store_true", help="tiny shapes, TRITON_INTERPRET=1")
ARGS.add_argument("--no-timing", action="store_true")
ARGS = ARGS.parse_args()
if ARGS.cpu_smoke:
    os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from zipage.compression import (REFERENCE_OPS, TRITON_OPS, CompressionBatch,  # noqa: E402
                                CompressionConfig, compress_batch, score_layers)
from zipage.kernels.eviction_score import select_keep  # noqa: E402

SMOKE = ARGS.cpu_smoke
DEV = "cpu" if SMOKE else "cuda"
# (B requests, H_q, H_kv, D, W, tokens per request, budget, layers timed)
SHAPE = (5, 4, 2, 32, 8, 48, 32, 2) if SMOKE else (64, 32, 8, 128, 16, 2304, 2048, 36)
RESULTS = []


def sync():
    if DEV == "cuda":
        torch.cuda.synchronize()


def build(L, b, mix=True):
    """Caches and a batch; kinds cycle: compressed, first, long prompt, shared-prefix owner,
    request sharing the owner's first 2 blocks. Keys share a direction (cosines near tau)."""
    B, Hq, H, D, W, n0, budget, _ = SHAPE
    C, N = budget // b, budget // b + 1
    kinds = [("compressed", "first", "long", "owner", "sharer")[s % 5] if mix else
             ("compressed", "first")[s % 2] for s in range(B)]
    lens = [n0 + b + b // 3 if k == "long" else n0 for k in kinds]
    nblk = [-(-n // b) for n in lens]
    NB = sum(nblk) + 2 * B + 1
    pool = torch.randperm(NB).tolist()
    tables, targets = [], []
    for s, k in enumerate(kinds):
        src = tables[s - 1][:2] if k == "sharer" else []
        src = src + [pool.pop() for _ in range(nblk[s] - len(src))]
        fresh = [pool.pop() for _ in range(2)] if k in ("owner", "sharer") else []
        tables.append(src)
        targets.append(fresh + src[len(fresh):][:N - len(fresh)])
    table = torch.full((B, max(nblk)), -1, dtype=torch.int32)
    for s, src in enumerate(tables):
        table[s, :len(src)] = torch.tensor(src, dtype=torch.int32)
    wpos = []
    for s, n in enumerate(lens):  # ring index of logical t is t % W; t - s evicted tokens
        t = torch.arange(n + s - W, n + s)
        wpos.append(torch.empty(W, dtype=torch.int32).index_put_((t % W,), (t - s).int()))
    dt = torch.float32 if SMOKE else torch.bfloat16
    kv_shape = (L, NB, b, H, D)
    k = torch.empty(kv_shape, device=DEV, dtype=dt).normal_().add_(0.8)  # no fp32 temporary
    v = torch.empty(kv_shape, device=DEV, dtype=dt).normal_()
    q = torch.empty(L, B + 3, W, Hq, D, device=DEV, dtype=dt).normal_()
    sc = torch.rand(L, NB, b, H, device=DEV)
    i32 = dict(dtype=torch.int32, device=DEV)
    batch = CompressionBatch(
        slots=torch.randperm(B + 3)[:B].to(**i32), block_tables=table.to(DEV),
        target_tables=torch.tensor(targets, **i32), phys_lens=torch.tensor(lens, **i32),
        window_pos=torch.stack(wpos).to(DEV),
        num_history=torch.tensor([C * b if k == "compressed" else 0 for k in kinds], **i32),
        num_keep=C * b)
    batch.check_values(b, W)
    return k, v, q, sc, batch


def check(name, fn):
    try:
        ok, msg = fn()
    except Exception:  # report and go on: one broken kernel must not hide the others
        ok, msg = False, traceback.format_exc(limit=3)
    RESULTS.append(ok)
    print(f"{'PASS' if ok else 'FAIL'} {name}: {msg}", flush=True)


def compare(out, ref, rtol, atol, min_frac=1.0):
    """Fraction of elements within tolerance (inf must match exactly)."""
    out, ref = out.float(), ref.float()
    fin = torch.isfinite(ref)
    close = torch.where(fin, (out - ref).abs() <= atol + rtol * ref.abs(), out == ref)
    frac = close.float().mean().item()
    err = (out - ref)[fin].abs().max().item() if fin.any() else 0.0
    return frac >= min_frac, f"within tol {frac:.6f} (need {min_frac}), max_abs_err {err:.3e}"


def check_all(b):
    k, v, q, sc, bt = build(2, b)
    args = (bt.block_tables, bt.phys_lens)
    tag = f"b={b}"
    A = TRITON_OPS.attention_score(k, q, bt.slots, *args, bt.window_pos)
    check(f"attention_score {tag}", lambda: compare(A, REFERENCE_OPS.attention_score(
        k, q, bt.slots, *args, bt.window_pos), 1e-3, 1e-6))
    rho = {}
    for mode in ("lightning", "raw"):  # near-tau flips from summation order: allow a few
        rho[mode] = TRITON_OPS.redundancy(k, *args, mode == "lightning", 0.5)
        check(f"redundancy {mode} {tag}", lambda: compare(rho[mode], REFERENCE_OPS.redundancy(
            k, *args, mode == "lightning", 0.5), 1e-4, 1e-2, 0.999))
    kw = dict(window=q.shape[2], num_sink=4, pooling_kernel_size=5, redundancy_mode="raw")
    fs = (A, rho["raw"], sc, *args, bt.num_history)
    F, S = TRITON_OPS.final_score(*fs, **kw)
    Fr, Sr = REFERENCE_OPS.final_score(*fs, **kw)
    check(f"final_score F {tag}", lambda: compare(F, Fr, 1e-4, 1e-6))
    check(f"final_score S (exact) {tag}", lambda: compare(S, Sr, 0.0, 0.0))
    keep = select_keep(F, bt.num_keep)
    outs = {}
    for name, ops in (("triton", TRITON_OPS), ("reference", REFERENCE_OPS)):
        outs[name] = [k.clone(), v.clone(), sc.clone()]
        ops.compact(outs[name][0], outs[name][1], keep, bt.block_tables, bt.target_tables,
                    bt.phys_lens, S, outs[name][2])
    check(f"compact (exact) {tag}", lambda: (all(torch.equal(x, y) for x, y in zip(
        outs["triton"], outs["reference"])), "K, V, score cache bitwise equal"))
    cfg = CompressionConfig.paper(observation_window=q.shape[2])
    keeps = [select_keep(score_layers(k, q, sc, bt, cfg, ops)[0], bt.num_keep)
             for ops in (TRITON_OPS, REFERENCE_OPS)]
    agree = (keeps[0] == keeps[1]).float().mean().item()
    check(f"pipeline keep agreement {tag}", lambda: (agree > 0.995, f"{agree:.6f}"))


def time_pipeline(cfg, label):
    L, b = SHAPE[7], 16 if SMOKE else 256
    k, v, q, sc, bt = build(L, b, mix=False)
    run = lambda prof: compress_batch(k, v, q, sc, bt, cfg, layer_chunk=8, profile=prof)  # noqa
    run(False)  # compile / warm up
    sync()
    walls = []
    for _ in range(1 if SMOKE else 3):
        t0 = time.perf_counter()
        run(False)
        sync()
        walls.append((time.perf_counter() - t0) * 1e3)
    stages = run(True)
    wall = sorted(walls)[len(walls) // 2]
    parts = "  ".join(f"{n}={t:.2f}" for n, t in stages.items())
    print(f"TIME {label}: {SHAPE[0]} requests x {L} layers, wall {wall:.2f} ms "
          f"({wall / L:.3f} ms/layer) | stages ms: {parts}", flush=True)


def main():
    if DEV == "cuda" and not torch.cuda.is_available():
        sys.exit("CUDA not available (use --cpu-smoke)")
    import triton
    gpu = torch.cuda.get_device_name() if DEV == "cuda" else "cpu (interpreter)"
    print(f"torch {torch.__version__}, triton {triton.__version__}, {gpu}")
    torch.manual_seed(0)
    for b in (16,) if SMOKE else (256, 16):
        check_all(b)
    if not ARGS.no_timing:
        for red in ("none", "lightning", "raw"):
            cfg = CompressionConfig.paper(observation_window=SHAPE[4], redundancy=red)
            try:
                time_pipeline(cfg, f"global+pool+{red}")
            except Exception:
                RESULTS.append(False)
                print(f"FAIL timing {red}:\n{traceback.format_exc(limit=3)}", flush=True)
    print(f"{sum(RESULTS)} passed, {len(RESULTS) - sum(RESULTS)} failed")
    sys.exit(0 if all(RESULTS) else 1)


if __name__ == "__main__":
    main()
