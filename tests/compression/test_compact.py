"""Compaction (docs/method.md §7): the four aliasing cases, shared prefixes, padded batches."""
import pytest
import torch
from compression_scene import MIXED, expected_compaction, make_scene, random_keep

from zipage.kernels.compact_kv import compact, compact_reference

SHARED = [  # two requests on one shared prefix, and a prefix longer than C blocks
    dict(kind="shared", shared=2, n=4 * 16 + 5),
    dict(kind="shared", shared=2, prefix_of=0, n=3 * 16 + 2),
    dict(kind="shared", shared=3, n=4 * 16 + 5),
    dict(kind="compressed"),
]


def _run(fn, sc, keep, S):
    k, v, cache = sc.k.clone(), sc.v.clone(), sc.sc.clone()
    bt = sc.batch
    fn(k, v, keep, bt.block_tables, bt.target_tables, bt.phys_lens, S, cache)
    return k, v, cache


def _check(got, want):
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("specs,D,dtype", [(MIXED, 16, torch.float32),
                                           (SHARED, 24, torch.bfloat16)])
def test_kernel_and_reference_match_naive(triton_cpu, specs, D, dtype):
    sc = make_scene(specs, D=D, dtype=dtype)
    keep, S = random_keep(sc)
    want = expected_compaction(sc, keep, S)
    _check(_run(compact, sc, keep, S), want)
    _check(_run(compact_reference, sc, keep, S), want)


def test_without_score_cache(triton_cpu):
    sc = make_scene(MIXED)
    keep, S = random_keep(sc)
    k, v = sc.k.clone(), sc.v.clone()
    bt = sc.batch
    compact(k, v, keep, bt.block_tables, bt.target_tables, bt.phys_lens)
    want = expected_compaction(sc, keep, S)
    _check((k, v), want[:2])


def test_keep_all_prefix_is_untouched(triton_cpu):
    """Already-compressed request keeping its first C*b slots: nothing moves."""
    sc = make_scene([dict(kind="compressed")])
    bt = sc.batch
    keep = torch.zeros(2, 1, 2, bt.block_tables.shape[1] * sc.b, dtype=torch.uint8)
    keep[..., : bt.num_keep] = 1
    k, v = sc.k.clone(), sc.v.clone()
    compact(k, v, keep, bt.block_tables, bt.target_tables, bt.phys_lens)
    _check((k, v), (sc.k, sc.v))
