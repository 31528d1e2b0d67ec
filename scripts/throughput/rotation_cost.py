"""GPU time of fp8_key_rotation per layer at decode batch sizes, with CUDA graphs as in the
engine: qk_rotary alone, qk_rotary with the rotation fused (rotate_keys, the engine's), and
the two matmuls (q and k times a D x D Hadamard) that the fusion replaced:

    python -m scripts.bench fp8-rotation      (Qwen3-8B shape: 32 q heads, 8 KV heads, D 128)
"""
import argparse

import torch

from scripts.arg_types import positive_int
from zipage.kernels.qk_rotary import qk_rotary
from zipage.layers.key_rotation import hadamard, rotate


def _graph_ms(fn, reps=20, layers=36):
    """ms per call of fn, replayed from a CUDA graph of `layers` calls (one decode step's)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(layers):
            fn()
    g.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        g.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps / layers


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--rows", type=positive_int, nargs="+", default=[64, 256, 512])
    ap.add_argument("--q-heads", type=positive_int, default=32)
    ap.add_argument("--kv-heads", type=positive_int, default=8)
    ap.add_argument("--head-dim", type=positive_int, default=128)


def main(a) -> int:
    if not torch.cuda.is_available():
        raise SystemExit("fp8-rotation times CUDA graphs: it needs a GPU")
    dev, dt, d = "cuda", torch.bfloat16, a.head_dim
    h = hadamard(d, dt, dev)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; ms per layer (x36 a step)")
    print("rows | qk_rotary | qk_rotary, rotation fused | two matmuls (unfused) | "
          "fused rotation / step (36 layers)")
    for n in a.rows:
        qkv = torch.randn(n, (a.q_heads + 2 * a.kv_heads) * d, device=dev, dtype=dt)
        cos, sin = (torch.randn(n, d // 2, device=dev) for _ in range(2))
        q, k = qk_rotary(qkv, a.q_heads, a.kv_heads, d, cos, sin)
        base = _graph_ms(lambda: qk_rotary(qkv, a.q_heads, a.kv_heads, d, cos, sin))
        fused = _graph_ms(lambda: qk_rotary(qkv, a.q_heads, a.kv_heads, d, cos, sin,
                                            rotate_keys=True))
        rot = _graph_ms(lambda: (rotate(q, h), rotate(k, h)))
        print(f"{n} | {base * 1e3:.1f} us | {fused * 1e3:.1f} us | {rot * 1e3:.1f} us | "
              f"{(fused - base) * 36:.3f} ms")
    return 0
