"""Check the attention kernels on CUDA against their PyTorch references, then time them.

    python scripts/gpu_check_attention.py              # H200-sized shapes, bf16 (~1 min)
    python scripts/gpu_check_attention.py --cpu-smoke  # tiny shapes, Triton interpreter on CPU

Prints PASS/FAIL per check with max abs error and error relative to max|ref|, and median
times (triton.testing.do_bench); exits 1 if any check fails.
"""
import argparse
import os
import sys
import time
import traceback
from pathlib import Path

ARGS = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ARGS.add_argument("--cpu-smoke", action="store_true", help="tiny shapes, TRITON_INTERPRET=1")
ARGS = ARGS.parse_args()
if ARGS.cpu_smoke:
    os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from zipage.kernels import (paged_decode_attention, paged_decode_attention_reference,  # noqa
                            paged_prefill_attention, paged_prefill_attention_reference,
                            store_kv, store_kv_reference, use_triton)

DEV = "cpu" if ARGS.cpu_smoke else "cuda"
DTYPE = torch.float32 if ARGS.cpu_smoke else torch.bfloat16
RESULTS = []


def bench_ms(fn):
    if DEV == "cpu":  # interpreter: one timed call is plenty
        t = time.perf_counter()
        fn()
        return (time.perf_counter() - t) * 1e3
    import triton.testing
    return triton.testing.do_bench(fn, warmup=10, rep=50, return_mode="median")


def report(name, out, ref, exact=False):
    o, r = out.float(), ref.float()
    err, mag = (o - r).abs().max().item(), r.abs().max().item()
    ok = bool(torch.isfinite(o).all()) and err <= (0.0 if exact else 2e-2 * mag + 1e-3)
    RESULTS.append(ok)
    print(f"{'PASS' if ok else 'FAIL'} {name}: max_abs_err={err:.3e} max|ref|={mag:.3e} "
          f"rel={err / max(mag, 1e-12):.2e}", flush=True)


def make_cache(ctx_list, H_kv, D, bs, spare=4):
    """Random paged K/V; blocks in random order; spare (unreferenced) blocks are NaN."""
    nblk = [-(-n // bs) for n in ctx_list]
    NB = sum(nblk) + spare
    k = torch.randn(NB, bs, H_kv, D, device=DEV, dtype=DTYPE)
    v = torch.randn(NB, bs, H_kv, D, device=DEV, dtype=DTYPE)
    perm = torch.randperm(NB, device=DEV).to(torch.int32)
    k[perm[sum(nblk):].long()] = float("nan")
    v[perm[sum(nblk):].long()] = float("nan")
    table = torch.full((len(ctx_list), max(nblk) + 1), -1, dtype=torch.int32, device=DEV)
    off = 0
    for s, nb in enumerate(nblk):
        table[s, :nb] = perm[off:off + nb]
        off += nb
    return k, v, table


def check_store(N, H_kv, D, bs):
    NB = -(-N // bs) + 2
    key = torch.randn(N, H_kv, D, device=DEV, dtype=DTYPE)
    value = torch.randn(N, H_kv, D, device=DEV, dtype=DTYPE)
    slots = torch.randperm(NB * bs, device=DEV)[:N]
    slots[::7] = -1
    kc, vc = (torch.randn(NB, bs, H_kv, D, device=DEV, dtype=DTYPE) for _ in range(2))
    kr, vr = kc.clone(), vc.clone()
    store_kv(key, value, kc, vc, slots)
    store_kv_reference(key, value, kr, vr, slots)
    report(f"store_kv N={N} H_kv={H_kv} D={D} b={bs}", torch.stack([kc, vc]),
           torch.stack([kr, vr]), exact=True)
    ms = bench_ms(lambda: store_kv(key, value, kc, vc, slots))
    gbs = 4 * key.numel() * key.element_size() / ms / 1e6  # read + write, K and V
    print(f"     {ms * 1e3:9.1f} us  {gbs:7.0f} GB/s")


def check_decode(B, H_q, H_kv, D, bs, max_ctx, num_splits=None, n_zero=0):
    ctx_list = torch.randint(1, max_ctx + 1, (B,)).tolist()
    ctx_list[0], ctx_list[-1] = max_ctx, max(1, bs + 1)  # longest row; partial second block
    for i in range(1, n_zero + 1):
        ctx_list[-1 - i] = 0  # padded batch rows
    k, v, table = make_cache(ctx_list, H_kv, D, bs)
    ctx = torch.tensor(ctx_list, dtype=torch.int32, device=DEV)
    q = torch.randn(B, H_q, D, device=DEV, dtype=DTYPE)
    scale = D ** -0.5

    def run():
        return paged_decode_attention(q, k, v, table, ctx, scale, num_splits=num_splits)

    out = run()
    ref = paged_decode_attention_reference(q, k, v, table, ctx, scale)
    report(f"decode B={B} H={H_q}/{H_kv} D={D} b={bs} ctx<={max_ctx} splits={num_splits}",
           out, ref)
    ms = bench_ms(run)
    nbytes = (sum(ctx_list) * 2 * H_kv * D + 2 * B * H_q * D) * q.element_size()
    print(f"     {ms * 1e3:9.1f} us  {nbytes / ms / 1e6:7.0f} GB/s (K/V + q/out)")


def check_decode_graph(B=64, H_q=32, H_kv=8, D=128, bs=16, max_ctx=1024):
    """Capture decode in a CUDA graph, change lengths/queries in place, replay."""
    k, v, table = make_cache([max_ctx] * B, H_kv, D, bs)
    ctx = torch.full((B,), max_ctx, dtype=torch.int32, device=DEV)
    q = torch.randn(B, H_q, D, device=DEV, dtype=DTYPE)
    out = torch.empty_like(q)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up compiles outside the capture
        paged_decode_attention(q, k, v, table, ctx, D ** -0.5, out=out)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        paged_decode_attention(q, k, v, table, ctx, D ** -0.5, out=out)
    ctx.copy_(torch.randint(0, max_ctx + 1, (B,), dtype=torch.int32))
    q.copy_(torch.randn_like(q))
    graph.replay()
    torch.cuda.synchronize()
    ref = paged_decode_attention_reference(q, k, v, table, ctx, D ** -0.5)
    report(f"decode CUDA graph replay B={B} b={bs}", out, ref)


def check_prefill(seqs, H_q, H_kv, D, bs, sdpa_baseline=False):
    q_lens, ctx_list = zip(*seqs)
    k, v, table = make_cache(ctx_list, H_kv, D, bs)
    cu = torch.zeros(len(seqs) + 1, dtype=torch.int32)
    cu[1:] = torch.cumsum(torch.tensor(q_lens), 0)
    cu = cu.to(DEV)
    ctx = torch.tensor(ctx_list, dtype=torch.int32, device=DEV)
    q = torch.randn(int(cu[-1]), H_q, D, device=DEV, dtype=DTYPE)
    scale, mq = D ** -0.5, max(q_lens)

    def run():
        return paged_prefill_attention(q, k, v, table, cu, ctx, mq, scale)

    out = run()
    ref = paged_prefill_attention_reference(q, k, v, table, cu, ctx, mq, scale)
    report(f"prefill {len(seqs)} seqs q_len<={mq} ctx<={max(ctx_list)} H={H_q}/{H_kv} D={D} "
           f"b={bs}", out, ref)
    ms = bench_ms(run)
    pairs = sum(sum(n - L + i + 1 for i in range(L)) for L, n in seqs)  # visible (q, k) pairs
    print(f"     {ms * 1e3:9.1f} us  {4 * pairs * H_q * D / ms / 1e9:7.1f} TFLOP/s")
    if sdpa_baseline and DEV == "cuda" and len(set(seqs)) == 1 and seqs[0][0] == seqs[0][1]:
        try:  # informative only: never fails the run
            S, L = len(seqs), seqs[0][0]
            qd = torch.randn(S, H_q, L, D, device=DEV, dtype=DTYPE)
            kd, vd = (torch.randn(S, H_kv, L, D, device=DEV, dtype=DTYPE) for _ in range(2))
            sdpa = torch.nn.functional.scaled_dot_product_attention
            ms = bench_ms(lambda: sdpa(qd, kd, vd, is_causal=True, enable_gqa=True))
            print(f"     torch SDPA dense baseline: {ms * 1e3:9.1f} us "
                  f"{4 * pairs * H_q * D / ms / 1e9:7.1f} TFLOP/s")
        except Exception as e:
            print(f"     torch SDPA baseline unavailable: {e!r}")

def main():
    torch.manual_seed(0)
    assert use_triton(torch.empty(0, device=DEV)), "Triton path not active (CUDA / triton?)"
    if ARGS.cpu_smoke:
        checks = [
            lambda: check_store(20, 2, 80, 16),
            lambda: check_decode(4, 4, 2, 64, 16, 70, num_splits=3, n_zero=1),
            lambda: check_decode(3, 9, 3, 64, 32, 40),
            lambda: check_prefill([(20, 20), (5, 37), (1, 18)], 4, 2, 64, 16),
        ]
    else:
        print(torch.cuda.get_device_name(), "torch", torch.__version__)
        checks = [
            lambda: check_store(256, 8, 128, 16),
            lambda: check_store(16384, 8, 128, 256),
            lambda: check_decode(256, 32, 8, 128, 16, 2304, n_zero=3),
            lambda: check_decode(256, 32, 8, 128, 256, 2304),
            lambda: check_decode(256, 32, 8, 128, 16, 2304, num_splits=4),
            lambda: check_decode(8, 32, 8, 128, 16, 16384),  # few long rows: split-K matters
            lambda: check_decode(64, 9, 3, 64, 16, 2048),    # SmolLM2-like: G=3, D=64
            check_decode_graph,
            lambda: check_prefill([(2048, 2048)] * 8, 32, 8, 128, 16, sdpa_baseline=True),
            lambda: check_prefill([(2048, 2048)] * 8, 32, 8, 128, 256),
            lambda: check_prefill([(512, 2048)] * 4 + [(1, 1500)] * 8, 32, 8, 128, 16),
            lambda: check_prefill([(700, 900), (33, 33), (1024, 3000)], 9, 3, 64, 16),
        ]
    t0 = time.time()
    for check in checks:
        try:
            check()
        except Exception:  # a crash is a failure; keep checking the rest
            traceback.print_exc()
            RESULTS.append(False)
    n_fail = RESULTS.count(False)
    print(f"{len(RESULTS) - n_fail}/{len(RESULTS)} checks passed in {time.time() - t0:.1f}s")
    sys.exit(1 if n_fail else 0)


if __name__ == "__main__":
    main()
