"""The measuring parts of `bench fp8-kernels` (scripts/throughput/fp8_kernels.py): timing,
the environment, the copy-bandwidth ceiling, and a random paged KV pool with its reference."""
import os
import sys
import time

import torch

def bench_ms(fn, cpu):
    if cpu:  # the interpreter: one wall-clock call (a flow check, not a timing)
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3
    import triton.testing
    return triton.testing.do_bench(fn, warmup=5, rep=25, return_mode="median")


def environment(cpu):
    import triton
    env = dict(torch=torch.__version__, triton=triton.__version__, cuda=torch.version.cuda)
    if not cpu:
        p = torch.cuda.get_device_properties(0)
        env.update(gpu=p.name, sms=p.multi_processor_count, capability=f"{p.major}.{p.minor}",
                   memory_gib=round(p.total_memory / 2**30, 1))
    return env


def copy_gbps(device, cpu):
    n = (64 << 20) if cpu else (2 << 30)
    src = torch.randint(0, 255, (n,), dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    ms = bench_ms(lambda: dst.copy_(src), cpu)
    return 2 * n / ms / 1e6


def rel_err(out, ref):
    return ((out.float() - ref.float()).abs().max() / ref.float().abs().max()).item()


def paged_pool(rows, ctx, H_kv, D, bs, fp8, device, layers=None):
    """(k, v, k_scale, v_scale, table): blocks of `rows` contexts of `ctx` keys in random
    order, a -1 column after each row; layers: a leading layer dimension (score kernel)."""
    from zipage.kernels.fp8 import quantize_reference
    nblk = -(-ctx // bs)
    NB = rows * nblk
    lead = () if layers is None else (layers,)
    table = torch.randperm(NB, device=device).int().view(rows, nblk)
    table = torch.cat([table, torch.full((rows, 1), -1, dtype=torch.int32, device=device)], 1)
    out = []
    for _ in range(2):
        x = torch.empty(*lead, NB, bs, H_kv, D, dtype=torch.float8_e4m3fn if fp8 else
                        torch.bfloat16, device=device)
        s = torch.empty(x.shape[:-1], device=device) if fp8 else None
        flat, flat_s = x.view(-1, bs, H_kv, D), None if s is None else s.view(-1, bs, H_kv)
        for i in range(0, flat.shape[0], 256):  # chunks: fp32 temporaries stay small
            n = min(256, flat.shape[0] - i)
            r = torch.randn(n, bs, H_kv, D, device=device, dtype=torch.bfloat16)
            r = r * torch.exp(torch.randn(n, bs, H_kv, 1, device=device, dtype=torch.bfloat16))
            if fp8:
                flat[i:i + n], flat_s[i:i + n] = quantize_reference(r)
            else:
                flat[i:i + n] = r
        out += [x, s]
    return out[0], out[2], out[1], out[3], table


def decode_query(rows, ctx, dims, device):
    """(q, context lens): a seeded bf16 query of `rows` rows with dims' heads, every context
    `ctx` keys long."""
    torch.manual_seed(0)
    q = torch.randn(rows, dims["H_q"], dims["D"], device=device, dtype=torch.bfloat16)
    return q, torch.full((rows,), ctx, dtype=torch.int32, device=device)


def decode_reference(q, k, v, table, lens, ks, vs, chunk=16):
    from zipage.kernels import paged_decode_attention_reference
    return torch.cat([paged_decode_attention_reference(
        q[i:i + chunk], k, v, table[i:i + chunk], lens[i:i + chunk], q.shape[-1] ** -0.5,
        k_scale=ks, v_scale=vs) for i in range(0, q.shape[0], chunk)])


def open_bench(name: str, cpu_smoke: bool):
    """(device, environment, copy GB/s) for a kernel benchmark, printed as its header; None
    (after saying why on stderr) where it cannot run: no CUDA GPU, or --cpu-smoke after
    triton was imported without the interpreter."""
    if cpu_smoke:
        if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
            print("--cpu-smoke needs TRITON_INTERPRET=1 before triton is imported",
                  file=sys.stderr)
            return None
        os.environ["TRITON_INTERPRET"] = "1"
    elif not torch.cuda.is_available():
        print(f"{name} needs a CUDA GPU (or --cpu-smoke)", file=sys.stderr)
        return None
    device = "cpu" if cpu_smoke else "cuda"
    env = environment(cpu_smoke)
    print(" ".join(f"{k}={v}" for k, v in env.items()), flush=True)
    copy = copy_gbps(device, cpu_smoke)
    print(f"copy bandwidth {copy:.1f} GB/s (read + written)", flush=True)
    return device, env, copy
