"""Redundancy sums (docs/method.md §6.5, §6.6): kernel vs reference, reference vs definition."""
import pytest
import torch
from compression_scene import MIXED, make_scene

from zipage.kernels.block_tables import gather_positions
from zipage.kernels.key_redundancy import redundancy, redundancy_reference


def _scene(**kw):
    sc = make_scene(MIXED, **kw)
    sc.k += 1.0  # shared direction: cosines spread around tau, many similar pairs
    return sc


def _args(sc):
    return sc.k, sc.batch.block_tables, sc.batch.phys_lens


@pytest.mark.parametrize("lightning", [False, True])
@pytest.mark.parametrize("D", [16, 32])
def test_kernel_matches_reference(triton_cpu, lightning, D):
    sc = _scene(D=D)
    out = redundancy(*_args(sc), lightning, 0.5)
    torch.testing.assert_close(out, redundancy_reference(*_args(sc), lightning, 0.5))


def test_kernel_bf16(triton_cpu):
    sc = _scene(dtype=torch.bfloat16)
    out = redundancy(*_args(sc), False, 0.5)
    torch.testing.assert_close(out, redundancy_reference(*_args(sc), False, 0.5), rtol=1e-4,
                               atol=1e-4)


def _naive(keys, b, lightning, tau):
    """rho(i) = sum_j c(i, j) [i != l(j)], l(j) = max{i : c(i, j) > tau}, c(i, i) = 0."""
    n = keys.shape[0]
    u = keys.double() / keys.double().norm(dim=-1, keepdim=True)

    def pair(i, j):
        return i != j and (not lightning or i // b == j // b)

    c = [[float(u[i] @ u[j]) if pair(i, j) else 0.0 for j in range(n)] for i in range(n)]
    partner = [max([i for i in range(n) if pair(i, j) and c[i][j] > tau], default=-1)
               for j in range(n)]
    return torch.tensor([sum(c[i][j] for j in range(n) if partner[j] != i) for i in range(n)])


@pytest.mark.parametrize("lightning", [False, True])
def test_reference_matches_definition(lightning):
    sc = _scene(L=1, H=1, C=1)
    ref = redundancy_reference(*_args(sc), lightning, 0.5)
    for s, n in enumerate(sc.batch.phys_lens.tolist()):
        keys = gather_positions(sc.k, sc.batch.block_tables[s], n)[0, :, 0]
        torch.testing.assert_close(ref[0, s, 0, :n], _naive(keys, sc.b, lightning, 0.5).float(),
                                   rtol=1e-4, atol=1e-4)
        assert bool((ref[0, s, :, n:] == 0).all())


def test_duplicates_charge_the_older_copy():
    """Three identical keys: the newest is every column's partner except its own, so it is
    charged only for the column whose partner is the middle one; the oldest pays most."""
    k = torch.randn(1, 1, 16, 1, 8)
    k[0, 0, :3] = k[0, 0, 0]
    table = torch.tensor([[0]], dtype=torch.int32)
    rho = redundancy_reference(k, table, torch.tensor([3], dtype=torch.int32), False, 0.5)
    # columns: l(0) = 2, l(1) = 2, l(2) = 1 -> rho = [2, 2 - 1, 2 - 2]
    torch.testing.assert_close(rho[0, 0, 0, :3], torch.tensor([2.0, 1.0, 0.0]))
