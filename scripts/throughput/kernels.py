"""Kernel benchmark: compiled Triton kernels on the GPU vs their PyTorch references and SDPA.

    python -m scripts.bench kernels [--only prefill,decode,store_kv,compression,sampler]
                              [--json PATH] [--prefill-sweep]

Prints hardware and versions, then one row per workload: median time (triton.testing.do_bench),
achieved TFLOP/s (prefill: 4 * visible query-key pairs * H_q * D) or GB/s (bytes read and
written once), the reference's time, dense SDPA on the same shape where one exists, and the
largest error relative to max |reference|. Seeds and workloads are fixed, so runs on two
commits compare row by row. Correctness is tested by `pytest -m gpu tests/gpu`.
"""
import argparse
import json
import sys

import torch

from scripts.throughput.kernel_timing import (environment, measure, paged_cache, print_row,
                                              wall_us)

SDPA = torch.nn.functional.scaled_dot_product_attention
SECTIONS = ("prefill", "decode", "store_kv", "compression", "sampler", "pointwise")
# (TILE_M, TILE_N, num_warps, num_stages) tried by --prefill-sweep
SWEEP = [(128, 64, 8, 2), (128, 64, 8, 3), (128, 128, 8, 2), (128, 128, 8, 3),
         (128, 32, 8, 3), (64, 64, 4, 3), (64, 128, 4, 2), (256, 64, 16, 3)]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--only", default=",".join(SECTIONS),
                        help=f"comma-separated sections of {SECTIONS}")
    parser.add_argument("--json", metavar="PATH", help="write the rows and environment here")
    parser.add_argument("--prefill-sweep", action="store_true",
                        help="also time prefill launch configurations (8 x 2048, b 16 and 256)")



def prefill_rows(args):
    from zipage.kernels import paged_prefill_attention, paged_prefill_attention_reference
    workloads = [("8 x 2048, b 16", [(2048, 2048)] * 8, 32, 8, 128, 16),
                 ("8 x 2048, b 256", [(2048, 2048)] * 8, 32, 8, 128, 256),
                 ("12 seqs: 4 x 512 new on 2048, 8 x 1 on 1500, b 16",
                  [(512, 2048)] * 4 + [(1, 1500)] * 8, 32, 8, 128, 16),
                 ("SmolLM2 9/3 heads D 64: 700/900, 33/33, 1024/3000, b 16",
                  [(700, 900), (33, 33), (1024, 3000)], 9, 3, 64, 16)]
    for name, seqs, H_q, H_kv, D, bs in workloads:
        torch.manual_seed(0)
        q_lens, ctx_list = zip(*seqs)
        k, v, table = paged_cache(ctx_list, H_kv, D, bs)
        cu = torch.tensor([0, *torch.tensor(q_lens).cumsum(0).tolist()], dtype=torch.int32,
                          device="cuda")
        ctx = torch.tensor(ctx_list, dtype=torch.int32, device="cuda")
        q = torch.randn(int(cu[-1]), H_q, D, device="cuda", dtype=torch.bfloat16)
        call = (q, k, v, table, cu, ctx, max(q_lens), D ** -0.5)
        flop = 4 * sum(L * (n - L) + L * (L + 1) // 2 for L, n in seqs) * H_q * D
        sdpa = None
        if len(set(seqs)) == 1 and seqs[0][0] == seqs[0][1]:  # dense SDPA on the same shape
            S, L = len(seqs), seqs[0][0]
            qd = torch.randn(S, H_q, L, D, device="cuda", dtype=torch.bfloat16)
            kd, vd = (torch.randn(S, H_kv, L, D, device="cuda", dtype=torch.bfloat16)
                      for _ in range(2))
            sdpa = flop, lambda: SDPA(qd, kd, vd, is_causal=True, enable_gqa=True)
        yield measure("prefill", f"{name}, H {H_q}/{H_kv}", "TFLOP/s", flop,
                      lambda: paged_prefill_attention(*call),
                      lambda: paged_prefill_attention_reference(*call), sdpa=sdpa)
        if args.prefill_sweep and name.startswith("8 x 2048"):
            for tm, tn, warps, stages in SWEEP:
                config = f"{name}: tile {tm} x {tn}, {warps} warps, {stages} stages"
                try:
                    yield measure("prefill sweep", config, "TFLOP/s", flop,
                                  lambda: paged_prefill_attention(*call, tile_m=tm, tile_n=tn,
                                                                  num_warps=warps,
                                                                  num_stages=stages))
                except Exception as exc:  # e.g. out of shared memory: try the next one
                    print(f"prefill sweep  {config}: {type(exc).__name__}", flush=True)


def decode_rows(args):
    from zipage.kernels import paged_decode_attention, paged_decode_attention_reference
    workloads = [("B 256, ctx <= 2304 (3 empty rows), b 16", 256, 32, 8, 128, 16, 2304, 3),
                 ("B 256, ctx <= 2304, b 256", 256, 32, 8, 128, 256, 2304, 0),
                 ("B 8, ctx <= 16384, b 16", 8, 32, 8, 128, 16, 16384, 0),
                 ("SmolLM2 B 64, 9/3 heads D 64, ctx <= 2048, b 16", 64, 9, 3, 64, 16, 2048, 0)]
    for name, B, H_q, H_kv, D, bs, longest, n_zero in workloads:
        torch.manual_seed(0)
        ctx_list = torch.randint(1, longest + 1, (B,)).tolist()
        ctx_list[0], ctx_list[-1] = longest, bs + 1
        for i in range(1, n_zero + 1):
            ctx_list[-1 - i] = 0
        k, v, table = paged_cache(ctx_list, H_kv, D, bs)
        ctx = torch.tensor(ctx_list, dtype=torch.int32, device="cuda")
        q = torch.randn(B, H_q, D, device="cuda", dtype=torch.bfloat16)
        call = (q, k, v, table, ctx, D ** -0.5)
        L = round(sum(ctx_list) / B)  # dense SDPA, every row at the mean context
        kd, vd = (torch.randn(B, H_kv, L, D, device="cuda", dtype=torch.bfloat16)
                  for _ in range(2))
        sdpa = ((B * L * 2 * H_kv * D + 2 * B * H_q * D) * 2,
                lambda: SDPA(q.view(B, H_q, 1, D), kd, vd, enable_gqa=True))
        nbytes = (sum(ctx_list) * 2 * H_kv * D + 2 * B * H_q * D) * 2
        yield measure("decode", name, "GB/s", nbytes, lambda: paged_decode_attention(*call),
                      lambda: paged_decode_attention_reference(*call), sdpa=sdpa)


def store_kv_rows(args):
    from zipage.kernels import store_kv, store_kv_reference
    for N, H_kv, D, bs in ((256, 8, 128, 16), (16384, 8, 128, 256)):
        torch.manual_seed(0)
        NB = -(-N // bs) + 2
        key, value = (torch.randn(N, H_kv, D, device="cuda", dtype=torch.bfloat16)
                      for _ in range(2))
        slots = torch.randperm(NB * bs, device="cuda")[:N]
        kc, vc = (torch.zeros(NB, bs, H_kv, D, device="cuda", dtype=torch.bfloat16)
                  for _ in range(2))
        yield measure("store_kv", f"{N} tokens, H_kv {H_kv}, D {D}, b {bs}", "GB/s",
                      4 * key.numel() * 2,  # read and write, K and V
                      lambda: store_kv(key, value, kc, vc, slots),
                      lambda: store_kv_reference(key, value, kc, vc, slots), check=False)


def compression_batch(L, num_requests=64, tokens=2304, budget=2048, b=256, H_q=32, H_kv=8,
                      D=128, W=16):
    """Qwen3-8B-shaped caches and a batch alternating already-compressed and first-time
    requests (one compression round of the long-reasoning benchmark)."""
    from zipage.compression import CompressionBatch
    torch.manual_seed(0)
    C, nblk = budget // b, -(-tokens // b)
    NB = num_requests * nblk + 1
    perm = torch.randperm(NB, device="cuda").int()
    table = perm[:num_requests * nblk].view(num_requests, nblk).contiguous()
    k = torch.empty(L, NB, b, H_kv, D, device="cuda", dtype=torch.bfloat16).normal_().add_(0.8)
    v = torch.empty_like(k).normal_()
    q = torch.randn(L, num_requests, W, H_q, D, device="cuda", dtype=torch.bfloat16)
    score = torch.rand(L, NB, b, H_kv, device="cuda")
    i32 = dict(dtype=torch.int32, device="cuda")
    t = torch.arange(tokens - W, tokens, device="cuda")
    batch = CompressionBatch(
        slots=torch.arange(num_requests, **i32), block_tables=table,
        target_tables=table[:, :C + 1].contiguous(),
        phys_lens=torch.full((num_requests,), tokens, **i32),
        window_pos=torch.empty(num_requests, W, **i32).copy_(t[torch.argsort(t % W)]),
        num_history=torch.tensor([C * b * (s % 2) for s in range(num_requests)], **i32),
        num_keep=C * b)
    return k, v, q, score, batch


def compression_rows(args):
    from zipage.compression import REFERENCE_OPS, CompressionConfig, compress_batch

    def timed(layers, cfg, ops=None, repeats=3):
        """Median wall time of `repeats` calls (after a compiling call when repeated) on
        fresh caches, and the per-stage times of one more call (ms)."""
        caches = compression_batch(layers)

        def run(profile=False):
            return compress_batch(*caches, cfg, 8, profile=profile, ops=ops)

        if repeats > 1:
            run()
        wall = sorted(wall_us(run) for _ in range(repeats))[repeats // 2]
        return wall, run(profile=True) if repeats > 1 else {}

    L = 36
    for red in ("none", "lightning", "raw"):
        cfg = CompressionConfig.paper(observation_window=16, redundancy=red)
        wall, stages = timed(L, cfg)
        ref_us = timed(2, cfg, REFERENCE_OPS, repeats=1)[0] * L / 2  # reference: 2 layers
        yield dict(section="compression", unit="ms/layer", time_us=wall, reference_us=ref_us,
                   workload=f"global + pool + {red} redundancy: 64 x 2304 tokens -> 2048, "
                            f"{L} layers, b 256", achieved=wall / L / 1e3,
                   stages_ms={n: round(t, 2) for n, t in stages.items()})


def sampler_rows(args):
    from zipage.kernels.sample import sample_tokens, sample_tokens_reference
    for B, V in ((192, 151936), (256, 151936)):
        g = torch.Generator(device="cuda").manual_seed(B)
        logits = 4 * torch.randn(B, V, device="cuda", generator=g)
        t = torch.rand(B, device="cuda", generator=g) + 0.3
        t[::5] = 0.0
        seeds = torch.randint(0, 2**40, (B,), device="cuda", generator=g)
        pos = torch.randint(0, 32768, (B,), device="cuda", generator=g)
        yield measure("sampler", f"B {B}, V {V}, 1 in 5 rows greedy", "GB/s",
                      logits.numel() * 4, lambda: sample_tokens(logits, t, seeds, pos),
                      lambda: sample_tokens_reference(logits, t, seeds, pos), check=False)


def pointwise_rows(args):
    """QK norm + RoPE and silu(gate) * up: the kernels, and as `ref` the torch.compile'd eager
    ops (dynamic shapes) that the decoder ran before them."""
    from zipage.kernels.qk_rotary import qk_rotary, qk_rotary_reference
    from zipage.kernels.silu_mul import silu_mul, silu_mul_reference
    from zipage.layers.pointwise import op
    compiled_rope = op(qk_rotary_reference, torch.empty(0, device="cuda"))
    compiled_silu = op(silu_mul_reference, torch.empty(0, device="cuda"))
    for T in (192, 256, 4096):
        torch.manual_seed(T)
        qkv = torch.randn(T, 48 * 128, device="cuda", dtype=torch.bfloat16)
        cos, sin = torch.rand(T, 64, device="cuda"), torch.rand(T, 64, device="cuda")
        w = torch.rand(128, device="cuda", dtype=torch.bfloat16)
        nbytes = 2 * T * 40 * 128 * 2 + 2 * T * 64 * 4
        yield measure("qk_rotary", f"T {T}, Hq 32, Hkv 8, D 128, QK norm", "GB/s", nbytes,
                      lambda: qk_rotary(qkv, 32, 8, 128, cos, sin, w, w)[0],  # error on q
                      lambda: compiled_rope(qkv, 32, 8, 128, cos, sin, w, w)[0])
        gate_up = torch.randn(T, 2 * 12288, device="cuda", dtype=torch.bfloat16)
        yield measure("silu_mul", f"T {T}, I 12288", "GB/s", 3 * T * 12288 * 2,
                      lambda: silu_mul(gate_up), lambda: compiled_silu(gate_up))


def main(args) -> int:
    if not torch.cuda.is_available():
        print("bench kernels needs a CUDA GPU", file=sys.stderr)
        return 2
    sections = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        print(f"unknown sections {sorted(unknown)}; choose from {SECTIONS}", file=sys.stderr)
        return 2
    env = environment()
    print(" ".join(f"{key}={value}" for key, value in env.items()), flush=True)
    print("columns: time, achieved, reference time (kernel speed-up), dense SDPA achieved "
          "(same unit), max |error| / max |reference|, workload (bf16)", flush=True)
    rows, failed = [], []
    for section in sections:
        try:
            for row in globals()[f"{section}_rows"](args):
                print_row(row)
                rows.append(row)
        except Exception as exc:  # report and go on: one broken section must not hide others
            print(f"{section}: FAILED {exc!r}", flush=True)
            failed.append(section)
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(environment=env, rows=rows, failed=failed), f, indent=1)
    return 1 if failed else 0

