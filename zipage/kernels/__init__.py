"""Triton kernels over the paged KV cache. Each is a triad: the kernel, a thin wrapper whose
docstring gives tensor shapes, and a PyTorch reference `<wrapper>_reference` in the same file
(the CPU path of the engine and the tests' oracle).

file                computes                                       CPU test (interpreter)
store_kv.py         new tokens' K/V into the cache; query ring     kernels/test_store_kv.py
paged_decode.py     attention of one new token per request, split  kernels/test_paged_decode.py
paged_prefill.py    causal attention of packed chunks, GQA tiles   kernels/test_paged_prefill.py
sample.py           seeded Gumbel-max sampling in one pass         kernels/test_sample.py
attention_score.py  window attention score A of cached tokens      compression/test_score.py
key_redundancy.py   key redundancy sums rho (raw, lightning)       compression/test_redundancy.py
eviction_score.py   final score F, global score S; top-K keep      compression/test_global.py
compact_kv.py       in-place compaction of kept K/V and scores     compression/test_compact.py
paged_tiles.py      shared jit steps: paged offsets, K/V tile      kernels/test_paged_tiles.py
                    loads, dot operands, online softmax, the
                    decode/prefill K/V loop; argument conventions
block_tables.py     host side of block tables (the references)     (compression tests)
fp8.py              FP8 (e4m3) cache layout: per-(token, head)     kernels/test_fp8_kv.py,
                    scales at offset // D; quantise/dequantise     compression/test_fp8_
                    references (the kernels take k/v_scale)        compression.py
fp8_tiles.py        FP8 tile steps: e4m3 dot operands, scales on    kernels/test_fp8_
                    score columns and folded into P; attend_tiles  attention.py
fp8_launch.py       FP8 launch defaults (operand, tiles, warps,    (the sweep picks them:
                    stages) and the per-call overrides             bench fp8-kernels)
_dispatch.py        Triton or the reference, by device             -

GPU tests (compiled kernels vs references, `pytest -m gpu tests/gpu`):
test_attention_kernels.py (store_kv, decode incl. CUDA-graph replay, prefill),
test_compression_kernels.py (the four compression kernels, pipeline keep agreement),
test_sampler_kernel.py. GPU timings: `python scripts/kernels.py`. The compression kernels
run in order in zipage.compression.pipeline.
"""
from zipage.kernels._dispatch import use_triton
from zipage.kernels.paged_decode import paged_decode_attention, paged_decode_attention_reference
from zipage.kernels.paged_prefill import paged_prefill_attention, paged_prefill_attention_reference
from zipage.kernels.store_kv import store_kv, store_kv_reference, store_rows, store_rows_reference

__all__ = [
    "use_triton",
    "store_kv", "store_kv_reference", "store_rows", "store_rows_reference",
    "paged_decode_attention", "paged_decode_attention_reference",
    "paged_prefill_attention", "paged_prefill_attention_reference",
]
