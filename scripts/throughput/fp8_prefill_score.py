"""The non-decode rows of `bench fp8-kernels`: FP8 prefill over a paged prefix (the engine's V
stored transposed, and V in rows by either path) and the compression score kernel, bf16 vs
fp8, the FP8 score at its default launch and at SCORE_CANDIDATES.

The candidates were picked from a compile for sm_90 with Triton 3.6 (the H200's) on the CPU,
the score at W 16, group 4, D 128: 64 keys, 4 warps, 3 stages (the default until the H200
sweep of 2026-12-05) takes 184 registers per thread, 2 programs per SM, where the bf16
kernel holds 3; 32 keys x 4 warps take 116-128 registers (4 per SM), 64 keys x 8 warps 126
(2 per SM, 16 warps). On the H200 32 keys, 4 warps, 2 stages was fastest (2.09 ms against
2.44), now the default (fp8_launch.FP8_SCORE). The score is
not bound by bytes (4 layers x 64 requests x 2,304 keys read 0.6 GB of fp8 keys in two passes,
0.15 ms at copy bandwidth, against 1.6-2.4 ms measured), so programs in flight are the lever.
"""
import torch

from scripts.throughput.fp8_kernel_parts import bench_ms, paged_pool, rel_err

# (tile_n, num_warps, num_stages); (64, 4, 3) is the default before 2026-12-05
SCORE_CANDIDATES = ((64, 4, 3), (32, 4, 3), (64, 8, 3))


def prefill_rows(dims, args, device):
    """Prefill of 8 x 512 new tokens over 4,096 cached (CPU smoke: 2 x 8 over 24)."""
    from zipage.kernels import paged_prefill_attention, paged_prefill_attention_reference
    from zipage.kernels.fp8 import copy_to_transposed_v
    H_q, H_kv, D, bs = dims["H_q"], dims["H_kv"], dims["D"], dims["bs"]
    seqs, new, cached = (2, 8, 24) if args.cpu_smoke else (8, 512, 4096)
    cu = torch.arange(seqs + 1, dtype=torch.int32, device=device) * new
    lens = torch.full((seqs,), cached + new, dtype=torch.int32, device=device)
    q = torch.randn(seqs * new, H_q, D, device=device, dtype=torch.bfloat16)
    flop = 4 * H_q * D * seqs * sum(cached + i + 1 for i in range(new))
    rows = []
    for kind in ("bf16", "fp8"):
        k, v, ks, vs, table = paged_pool(seqs, cached + new, H_kv, D, bs, kind == "fp8", device)
        args_p = (table, cu, lens, new, D ** -0.5)
        ref = paged_prefill_attention_reference(q, k, v, *args_p, k_scale=ks, v_scale=vs)
        caches = {None: v} if kind == "bf16" else {
            "transposed": copy_to_transposed_v(v), "registers": v, "bytes": v}
        for v_path, v_cache in caches.items():  # fp8: the engine's layout, then V in rows
            in_rows = v_path in ("registers", "bytes")
            call = lambda: paged_prefill_attention(  # noqa: E731
                q, k, v_cache, *args_p, k_scale=ks, v_scale=vs,
                fp8_v_in_registers=(v_path == "registers") if in_rows else None)
            ms = bench_ms(call, args.cpu_smoke)
            rows.append(dict(workload=f"prefill {seqs} x {new} new over {cached} cached",
                             kind=kind if v_path is None else f"fp8, V {v_path}", ms=ms,
                             tflops=flop / ms / 1e9, rel_err=rel_err(call(), ref)))
        del k, v, ks, vs, caches
    return rows


def score_rows(dims, args, device):
    """The window score of 4 layers x 64 requests x 2,304 keys, W 16 (CPU smoke: 1 x 2 x 40,
    W 4), bf16 and fp8 at the default launch, then fp8 at SCORE_CANDIDATES."""
    from zipage.kernels.attention_score import attention_score, attention_score_reference
    from zipage.kernels.fp8_launch import FP8_SCORE
    H_q, H_kv, D, bs = dims["H_q"], dims["H_kv"], dims["D"], dims["bs"]
    L, reqs, n, W = (1, 2, 40, 4) if args.cpu_smoke else (4, 64, 2304, 16)
    qc = torch.randn(L, reqs, W, H_q, D, device=device, dtype=torch.bfloat16)
    i32 = dict(dtype=torch.int32, device=device)
    t = torch.arange(n - W, n, device=device)
    window = torch.empty(reqs, W, **i32).copy_(t[torch.argsort(t % W)])  # ring order
    default = (FP8_SCORE.tile_n, FP8_SCORE.num_warps, FP8_SCORE.num_stages)
    candidates = [c for c in SCORE_CANDIDATES if c != default]
    if args.cpu_smoke:
        candidates = [(16, 4, 2)]
    rows = []
    for kind in ("bf16", "fp8"):
        k, _, ks, _, table = paged_pool(reqs, n, H_kv, D, bs, kind == "fp8", device, layers=L)
        sargs = (qc, torch.arange(reqs, **i32), table, torch.full((reqs,), n, **i32), window)
        ref = attention_score_reference(k, *sargs, k_scale=ks)
        nbytes = 2 * L * reqs * n * H_kv * ((D + 4) if kind == "fp8" else 2 * D)  # two passes
        launches = [None] + (candidates if kind == "fp8" else [])
        for launch in launches:
            kw = {} if launch is None else dict(zip(("tile_n", "num_warps", "num_stages"),
                                                    launch))
            call = lambda: attention_score(k, *sargs, k_scale=ks, **kw)  # noqa: E731
            ms = bench_ms(call, args.cpu_smoke)
            label = "" if launch is None else " {} keys, {} warps, {} stages".format(*launch)
            rows.append(dict(workload=f"score {L} layers x {reqs} requests x {n} keys, W {W}",
                             kind=kind + label, ms=ms, gbps=nbytes / ms / 1e6,
                             rel_err=rel_err(call(), ref), **kw))
        del k, ks
    return rows


def other_rows(dims, args, device):
    """Prefill and score rows, printed sorted by workload."""
    rows = prefill_rows(dims, args, device) + score_rows(dims, args, device)
    for r in sorted(rows, key=lambda r: r["workload"]):
        rate = f"{r['tflops']:7.1f} TFLOP/s" if "tflops" in r else f"{r['gbps']:7.1f} GB/s   "
        print(f"  {r['workload']:<50} {r['kind']:<36} {r['ms']:8.3f} ms {rate}  "
              f"err {r['rel_err']:.1e}", flush=True)
    return rows
