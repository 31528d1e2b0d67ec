"""Is the redundancy kernel's time data-dependent? Random keys vs highly similar keys.

Hypothesis (docs/measurements.md): with similar keys every column finds a partner and many
columns share one, so the partner corrections pile up as atomic adds on few addresses.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import triton.testing  # noqa: E402

from zipage.kernels.key_redundancy import redundancy  # noqa: E402

L, B, H, D, b, n_blocks = 8, 64, 8, 128, 256, 9
NB = B * n_blocks
tables = torch.arange(NB, dtype=torch.int32, device="cuda").view(B, n_blocks)
phys = torch.full((B,), n_blocks * b, dtype=torch.int32, device="cuda")
random_keys = torch.randn(L, NB, b, H, D, device="cuda", dtype=torch.bfloat16)
base = torch.randn(1, 1, 1, H, D, device="cuda")
similar_keys = (base + 0.3 * torch.randn(L, NB, b, H, D, device="cuda")).to(torch.bfloat16)
for name, keys in (("random keys", random_keys), ("similar keys", similar_keys)):
    for lightning in (True, False):
        ms = triton.testing.do_bench(lambda: redundancy(keys, tables, phys, lightning, 0.5),
                                     return_mode="median")
        print(f"{name:13s} {'lightning' if lightning else 'raw':9s} {ms:8.2f} ms per 8-layer chunk")
