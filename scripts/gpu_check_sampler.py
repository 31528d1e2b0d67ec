"""Sampling kernel on the GPU: same tokens as the PyTorch reference, and its time.

Exits non-zero if the kernel's tokens differ from the reference beyond float near-ties
(a differing row must have the kernel's pick within 1e-4 of the reference row maximum).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import triton.testing  # noqa: E402

from zipage.kernels.sample import race_scores, sample_tokens, sample_tokens_reference  # noqa: E402


def main():
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    ok = True
    for B, V in ((192, 151936), (256, 151936), (7, 49152)):
        g = torch.Generator(device="cuda").manual_seed(B)
        logits = 4 * torch.randn(B, V, device="cuda", generator=g)
        t = torch.rand(B, device="cuda", generator=g) + 0.3
        t[::5] = 0.0  # some greedy rows
        seeds = torch.randint(0, 2**40, (B,), device="cuda", generator=g)
        pos = torch.randint(0, 32768, (B,), device="cuda", generator=g)
        got, ref = sample_tokens(logits, t, seeds, pos), sample_tokens_reference(logits, t, seeds, pos)
        score = race_scores(logits, t, seeds, pos)
        gap = (score.gather(1, ref[:, None]) - score.gather(1, got[:, None])).abs().max().item()
        same = (got == ref).float().mean().item()
        passed = gap < 1e-4
        ok &= passed
        ms_k = triton.testing.do_bench(lambda: sample_tokens(logits, t, seeds, pos))
        ms_r = triton.testing.do_bench(lambda: sample_tokens_reference(logits, t, seeds, pos))
        print(f"{'PASS' if passed else 'FAIL'} B={B} V={V}: identical tokens {same:.4f}, max score gap "
              f"{gap:.2e}; kernel {ms_k * 1e3:.0f} us, reference {ms_r * 1e3:.0f} us "
              f"({ms_r / ms_k:.1f}x)")
    print("sampler:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
