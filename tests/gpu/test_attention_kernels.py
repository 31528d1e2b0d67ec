"""Compiled attention kernels on CUDA (store_kv, paged decode, paged prefill) against their
PyTorch references, on fresh random inputs whose unused cache memory is NaN. Timings:
`python -m scripts.bench kernels`."""
import pytest
import torch

from tests.kernels.kernel_testlib import (compiled_variants, cuda_kernels,  # noqa: F401
                                          decode_batch, prefill_batch)
from zipage.kernels import (paged_decode_attention, paged_decode_attention_reference,
                            paged_prefill_attention, paged_prefill_attention_reference, store_kv,
                            store_kv_reference)
from zipage.kernels import paged_decode_split, paged_prefill

BF16, FP32 = torch.bfloat16, torch.float32
TOL = {BF16: dict(rtol=2e-2, atol=2e-2), FP32: dict(rtol=1e-4, atol=1e-5)}


def _ragged(B, longest, block_size, n_zero=0):
    """Context lengths: one of `longest`, one just past a block, n_zero empty rows."""
    ctx = torch.randint(1, longest + 1, (B,)).tolist()
    ctx[0], ctx[-1] = longest, min(longest, block_size + 1)
    for i in range(1, n_zero + 1):
        ctx[-1 - i] = 0
    return ctx


@pytest.mark.parametrize("N,H_kv,D,bs,src_dtype,cache_dtype", [
    (256, 8, 128, 16, BF16, BF16),
    (16384, 8, 128, 256, BF16, BF16),
    (1000, 3, 64, 16, FP32, BF16),  # cast on store: rounds to nearest even like torch
    (777, 2, 80, 32, FP32, FP32),
])
def test_store_kv_matches_reference(cuda_kernels, N, H_kv, D, bs, src_dtype, cache_dtype):
    NB = -(-N // bs) + 2
    qkv = torch.randn(N, 3 * H_kv * D, device="cuda").to(src_dtype)  # strided token rows
    key, value = (qkv[:, i * H_kv * D:(i + 1) * H_kv * D].view(N, H_kv, D) for i in (1, 2))
    slots = torch.randperm(NB * bs, device="cuda")[:N]
    slots[::7] = -1
    caches = [torch.randn(NB, bs, H_kv, D, device="cuda").to(cache_dtype) for _ in range(2)]
    expected = [c.clone() for c in caches]
    store_kv(key, value, *caches, slots)
    store_kv_reference(key, value, *expected, slots)
    for got, want in zip(caches, expected):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("B,G,H_kv,D,bs,longest,splits,n_zero,dtype", [
    (256, 4, 8, 128, 16, 2304, None, 3, BF16),
    (256, 4, 8, 128, 256, 2304, None, 0, BF16),
    (256, 4, 8, 128, 16, 2304, 4, 0, BF16),
    (8, 4, 8, 128, 16, 16384, None, 0, BF16),  # few long rows: split-K matters
    (64, 3, 3, 64, 16, 2048, None, 1, BF16),   # SmolLM2: 9 query / 3 KV heads, D 64
    (32, 4, 8, 128, 16, 2304, None, 1, FP32),
    (16, 8, 1, 80, 32, 700, 3, 1, FP32),       # head dim padded to 128, G 8
])
def test_decode_matches_reference(cuda_kernels, B, G, H_kv, D, bs, longest, splits, n_zero,
                                  dtype):
    ctx_lens = _ragged(B, longest, bs, n_zero)
    q, k, v, table, ctx = decode_batch(ctx_lens, G, H_kv, D, bs, dtype, device="cuda")
    out = paged_decode_attention(q, k, v, table, ctx, D ** -0.5, num_splits=splits)
    ref = paged_decode_attention_reference(q, k, v, table, ctx, D ** -0.5)
    torch.testing.assert_close(out, ref, **TOL[dtype])
    assert torch.count_nonzero(out[ctx == 0]) == 0  # empty rows give zeros, not NaN


def test_decode_cuda_graph_replay(cuda_kernels):
    """Capture once, then change context lengths and queries in place and replay."""
    B, G, H_kv, D, bs, longest = 64, 4, 8, 128, 16, 1024
    q, k, v, table, ctx = decode_batch([longest] * B, G, H_kv, D, bs, BF16, device="cuda")
    q = q.contiguous()
    out = torch.empty_like(q)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # compile outside the capture
        paged_decode_attention(q, k, v, table, ctx, D ** -0.5, out=out)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        paged_decode_attention(q, k, v, table, ctx, D ** -0.5, out=out)
    for _ in range(2):
        ctx.copy_(torch.randint(0, longest + 1, (B,), dtype=torch.int32))
        q.copy_(torch.randn_like(q))
        graph.replay()
        ref = paged_decode_attention_reference(q, k, v, table, ctx, D ** -0.5)
        torch.testing.assert_close(out, ref, **TOL[BF16])


PREFILL = [  # (sequences as (q_len, context_len), G, H_kv, D, block size, dtype)
    ([(2048, 2048)] * 8, 4, 8, 128, 16, BF16),
    ([(2048, 2048)] * 8, 4, 8, 128, 256, BF16),
    ([(512, 2048)] * 4 + [(1, 1500)] * 8, 4, 8, 128, 16, BF16),  # prefix hits, chunks
    ([(700, 900), (33, 33), (1024, 3000)], 3, 3, 64, 16, BF16),  # SmolLM2 shape
    ([(300, 300), (129, 1000), (1, 77)], 4, 8, 128, 16, FP32),
    ([(300, 300), (129, 1000), (0, 40)], 2, 2, 64, 256, FP32),
]
# GQA packing across group sizes, head dims and block sizes; prefixes of any length
GQA = [(G, D, bs) for G, D, bs in [(1, 64, 16), (1, 128, 256), (2, 64, 256), (2, 128, 16),
                                   (4, 64, 16), (4, 128, 256), (8, 64, 256), (8, 128, 16)]]
GQA_SEQS = [(333, 333), (250, 1100), (1, 513), (77, 77), (0, 20)]


def _check_prefill(seqs, G, H_kv, D, bs, dtype):
    q, k, v, table, cu, ctx, _ = prefill_batch(seqs, G, H_kv, D, bs, dtype, device="cuda")
    max_q_len = max(n for n, _ in seqs)
    out = paged_prefill_attention(q, k, v, table, cu, ctx, max_q_len, D ** -0.5)
    ref = paged_prefill_attention_reference(q, k, v, table, cu, ctx, max_q_len, D ** -0.5)
    torch.testing.assert_close(out, ref, **TOL[dtype])


@pytest.mark.parametrize("seqs,G,H_kv,D,bs,dtype", PREFILL)
def test_prefill_matches_reference(cuda_kernels, seqs, G, H_kv, D, bs, dtype):
    _check_prefill(seqs, G, H_kv, D, bs, dtype)


@pytest.mark.parametrize("G,D,bs", GQA)
def test_prefill_gqa_packing(cuda_kernels, G, D, bs):
    _check_prefill(GQA_SEQS, G, 8 // G, D, bs, BF16)


def test_one_compiled_variant_for_every_step(cuda_kernels):
    """Batch size, table width and split count change from step to step; after the first
    steps none may compile a new kernel variant (each one stalls the engine for seconds).
    The steps put the table width and the split count in every specialisation class: 1,
    % 16 == 0, other. Decode has two variants by design: one split (it writes the output
    itself) and several (the merge follows); the engine's graph capture compiles both."""
    G, H_kv, D, bs = 2, 2, 64, 32  # a configuration no other test compiles
    counts = []
    steps = ((1, 1), (3, 7), (8, 32), (33, 48))  # default splits: 1, 4, 16, 8
    for B, width in steps + steps:
        ctx_lens = torch.randint(1, width * bs + 1, (B,)).tolist()
        ctx_lens[0] = width * bs
        q, k, v, table, ctx = decode_batch(ctx_lens, G, H_kv, D, bs, BF16, device="cuda")
        table = table[:, :width].contiguous()  # row stride = width
        paged_decode_attention(q, k, v, table, ctx, D ** -0.5)
        seqs = [(min(n, 50), n) for n in ctx_lens]
        q, k, v, table, cu, ctx, _ = prefill_batch(seqs, G, H_kv, D, bs, BF16, device="cuda")
        paged_prefill_attention(q, k, v, table[:, :width].contiguous(), cu, ctx, 50, D ** -0.5)
        counts.append((compiled_variants(paged_decode_split._split_kernel),
                       compiled_variants(paged_prefill._prefill_kernel)))
    assert counts[-1] == counts[1], counts  # nothing new after one split and several
    assert counts[-1][0] - counts[0][0] <= 1, counts
