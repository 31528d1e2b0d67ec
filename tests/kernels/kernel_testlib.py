"""Inputs shared by the kernel tests (interpreter on CPU, compiled on GPU): poisoned paged
caches, packed prefill and decode batches, sampling rows; a naive dense attention; FP8
caches and the FP8 attention tolerance; and the fixture of the GPU tests."""
import pytest
import torch


@pytest.fixture
def cuda_kernels():
    """The compiled Triton kernels on CUDA, seeded inputs (tests/gpu skips without CUDA)."""
    from zipage.kernels._dispatch import HAS_TRITON, INTERPRET
    if INTERPRET or not HAS_TRITON:  # a GPU test under the interpreter would test nothing new
        pytest.fail("GPU kernel tests need compiled Triton: unset TRITON_INTERPRET")
    torch.manual_seed(0)
    return torch.device("cuda")


def compiled_variants(kernel) -> int:
    """Number of compiled variants of a @triton.jit kernel (all devices)."""
    caches = getattr(kernel, "device_caches", None)
    assert caches is not None, "this Triton keeps no JITFunction.device_caches: update the helper"
    return sum(len(cache[0]) for cache in caches.values())


def make_paged(ctx_lens, num_kv_heads, head_dim, block_size, dtype=torch.float32,
               extra_cols=1, spare_blocks=3, device="cpu"):
    """Random paged K/V for sequences of `ctx_lens` keys, everything else poisoned.

    Blocks are assigned in random order; slots past each length, unused blocks and the
    memory just before/after the cache (where a -1 table entry would land) hold NaN, so a
    kernel that reads anything it should not produces NaN. Returns
    (k_cache, v_cache, block_tables int32 padded with -1, dense [(k, v)] per sequence).
    """
    nblk = [-(-n // block_size) for n in ctx_lens]
    NB = sum(nblk) + spare_blocks
    shape = (NB + 2, block_size, num_kv_heads, head_dim)
    k_store = torch.full(shape, float("nan"), dtype=dtype, device=device)
    v_store = torch.full(shape, float("nan"), dtype=dtype, device=device)
    k_cache, v_cache = k_store[1:-1], v_store[1:-1]  # contiguous views with NaN guards
    perm = torch.randperm(NB).tolist()
    table = torch.full((len(ctx_lens), max(nblk, default=0) + extra_cols), -1, dtype=torch.int32)
    dense = []
    for s, n in enumerate(ctx_lens):
        blocks = [perm.pop() for _ in range(nblk[s])]
        table[s, : nblk[s]] = torch.tensor(blocks, dtype=torch.int32)
        k = torch.randn(n, num_kv_heads, head_dim, device=device).to(dtype)
        v = torch.randn(n, num_kv_heads, head_dim, device=device).to(dtype)
        idx = torch.arange(n)
        slots = (table[s].long()[idx // block_size] * block_size + idx % block_size).to(device)
        k_cache.view(-1, num_kv_heads, head_dim)[slots] = k
        v_cache.view(-1, num_kv_heads, head_dim)[slots] = v
        dense.append((k, v))
    return k_cache, v_cache, table.to(device), dense


def decode_batch(ctx_lens, group, num_kv_heads, head_dim, block_size, dtype=torch.float32,
                 device="cpu"):
    """(q, k_cache, v_cache, block_tables, context_lens) for one query token per request;
    q is a strided slice of a fused qkv projection, as in the model."""
    B, H_q = len(ctx_lens), group * num_kv_heads
    k_cache, v_cache, table, _ = make_paged(ctx_lens, num_kv_heads, head_dim, block_size,
                                            dtype, extra_cols=2, device=device)
    ctx = torch.tensor(ctx_lens, dtype=torch.int32, device=device)
    fused = torch.randn(B, (H_q + 2 * num_kv_heads) * head_dim, device=device).to(dtype)
    q = fused[:, : H_q * head_dim].view(B, H_q, head_dim)
    return q, k_cache, v_cache, table, ctx


def prefill_batch(seqs, group, num_kv_heads, head_dim, block_size, dtype=torch.float32,
                  device="cpu"):
    """Packed prefill inputs for sequences given as (q_len, context_len): returns
    (q, k_cache, v_cache, block_tables, cu_seqlens_q, context_lens, dense K/V per sequence)."""
    q_lens, ctx_list = zip(*seqs)
    k_cache, v_cache, table, dense = make_paged(ctx_list, num_kv_heads, head_dim, block_size,
                                                dtype, device=device)
    cu = torch.zeros(len(seqs) + 1, dtype=torch.int32)
    cu[1:] = torch.cumsum(torch.tensor(q_lens), 0)
    ctx = torch.tensor(ctx_list, dtype=torch.int32, device=device)
    q = torch.randn(int(cu[-1]), group * num_kv_heads, head_dim, device=device).to(dtype)
    return q, k_cache, v_cache, table, cu.to(device), ctx, dense


def sampling_rows(B, V, dtype=torch.float32, greedy_rows=(), device="cpu"):
    """(scores, temperature, seeds, positions) for B rows over a vocabulary of V."""
    scores = (3 * torch.randn(B, V, device=device)).to(dtype)
    temperature = torch.rand(B, device=device) + 0.2
    temperature[list(greedy_rows)] = 0.0
    seeds = torch.randint(0, 2**40, (B,), device=device)
    positions = torch.randint(0, 40000, (B,), device=device)
    return scores, temperature, seeds, positions


def naive_attention(q, k, v, scale, offset):
    """Dense causal attention, independent of the paged code: q (L, H_q, D), k/v (n, H_kv, D);
    query i sees keys j <= offset + i. fp64 via torch SDPA with an explicit mask."""
    G = q.shape[1] // k.shape[1]
    qh = q.double().transpose(0, 1)  # (H_q, L, D)
    kh = k.double().repeat_interleave(G, 1).transpose(0, 1)
    vh = v.double().repeat_interleave(G, 1).transpose(0, 1)
    i = torch.arange(q.shape[0])[:, None]
    j = torch.arange(k.shape[0])[None, :]
    mask = j <= offset + i
    o = torch.nn.functional.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask, scale=scale)
    return o.transpose(0, 1)


F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
# torch.float8_e4m3fn: the e4m3-MMA decode's operands, two e4m3 terms (8 significant bits)
UNIT_ROUNDOFF = {F32: 2**-24, F16: 2**-11, BF16: 2**-8, torch.float8_e4m3fn: 2**-8}


def fp8_cache(cache):
    """(e4m3 cache, scales) of `cache` with token magnitudes spread over four decades, so
    the scales of one tile differ (NaN poison stays NaN)."""
    spread = 10 ** (4 * torch.rand(*cache.shape[:-1], 1, device=cache.device) - 3)
    return quantize_paged(cache * spread)


def assert_fp8_close(out, ref, operand, v_cache, v_scale):
    """FP8 attention `out` against the fp32 reference on q rounded to the dot `operand`:
    P and V * w rounded to the operand (relative u each; P * w once on the former V path)
    move an output, a convex combination of V rows, by at most 2u * max|v|. Allowed:
    2u * max|v|, at least 2^-16 * max|v| (fp32 sums in another order), and one bf16 ulp
    (2^-7 relative) for bf16 outputs (both sides round)."""
    from zipage.kernels.fp8 import dequantize_reference
    v_max = dequantize_reference(v_cache, v_scale).nan_to_num().abs().max().item()
    atol = max(2 * UNIT_ROUNDOFF[operand], 2**-16) * v_max
    rtol = 2**-7 if out.dtype == BF16 else 0.0
    torch.testing.assert_close(out, ref, atol=atol, rtol=rtol)


def poisoned_decode_outputs(B, H_q, D, q_dtype, splits, device="cpu"):
    """(out, scratch) for paged_decode_attention filled with NaN, so a row or split a kernel
    does not write shows; scratch None without splits."""
    from zipage.kernels.paged_decode import decode_scratch
    out = torch.full((B, H_q, D), float("nan"), dtype=q_dtype, device=device)
    if not splits:
        return out, None
    return out, tuple(t.fill_(float("nan")) for t in decode_scratch(B, H_q, D, splits, device))


def quantize_paged(cache):
    """(fp8 cache, float32 scales) of a (NB, b, H, D) cache (fp8.quantize_reference), both
    views inside NaN guards like make_paged's; NaN (poisoned) rows stay NaN."""
    from zipage.kernels.fp8 import FP8_DTYPE, quantize_reference
    q, s = quantize_reference(cache)
    q_store = torch.full((q.shape[0] + 2, *q.shape[1:]), float("nan"), device=q.device)
    s_store = torch.full((s.shape[0] + 2, *s.shape[1:]), float("nan"), device=q.device)
    q_store, s_store = q_store.to(FP8_DTYPE), s_store
    q_store[1:-1], s_store[1:-1] = q, s
    return q_store[1:-1], s_store[1:-1]


def v_transposed(cache):
    """An fp8 (NB, b, H, D) cache copied into fp8.transposed_v_view's layout (the engine's FP8
    V cache), inside NaN guards like quantize_paged's."""
    from zipage.kernels.fp8 import FP8_DTYPE, transposed_v_view
    store = torch.full((cache.shape[0] + 2, *cache.shape[1:]), float("nan"),
                       device=cache.device).to(FP8_DTYPE)
    view = transposed_v_view(store)[1:-1]
    view.copy_(cache)
    assert torch.equal(view.view(torch.uint8), cache.view(torch.uint8))
    return view
