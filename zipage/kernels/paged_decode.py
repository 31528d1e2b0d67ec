"""Paged decode attention (one query token per request), split-K / flash-decoding style.

Kernel 1, grid (B, H_kv, S): a program owns one KV head of one request and one contiguous
range of key tiles (split). It handles all G = H_q // H_kv query heads of that KV head at
once, so each K/V tile is loaded once per group, and writes unnormalised partial results
(running max m, sum l, accumulator acc) to fp32 scratch. Kernel 2, grid (B, H_q), merges
the S partials. With S = 1 (large batches: B * H_kv programs fill the GPU) kernel 1 writes
the normalised output itself and kernel 2 is not launched. Key ranges come from
context_lens inside the kernel, so grid and scratch depend only on shapes: the pair is
CUDA-graph capturable. Kernel 1 is paged_decode_split.py's; on an FP8 cache (k/v_scale
given) with V stored transposed it is by default fp8_decode_flat.py's flat kernel instead (a
few programs per SM, each looping over the tiles of several (request, KV head, split)
items; fp8_launch.FP8_DECODE). FP8 per token and layer of Qwen3-8B reads 2,112 B against
bf16's 4,096, for the same 16,384 FLOP (docs/fp8.md counts them).
"""
import functools
import math
from dataclasses import dataclass, replace

import torch

from zipage.kernels._dispatch import cdiv, next_pow2, tl, triton, use_triton
from zipage.kernels.fp8 import FP8_DTYPE, check_scales, dequantize_reference, v_layout
from zipage.kernels.fp8_decode_mma import check_e4m3_launch
from zipage.kernels.fp8_decode_mma_reference import paged_decode_e4m3_reference
from zipage.kernels.fp8_decode_flat import (flat_num_splits, flat_programs,
                                            flat_programs_per_sm, flat_refusal,
                                            paged_decode_flat)
from zipage.kernels.fp8_launch import (DECODE_OPERANDS, E4M3_DECODE, FP8_DECODE, Launch,
                                       check_v_path, launch_for)
from zipage.kernels.paged_decode_split import launch_split_kernel


# launch of a full-precision cache (operand: the cache dtype); FP8: fp8_launch.FP8_DECODE
_DECODE = Launch(torch.bfloat16, tile_n=64, num_warps=4, num_stages=2)


@triton.jit(do_not_specialize=["num_splits"])
def _merge_kernel(partial_out_ptr, partial_max_ptr, partial_sum_ptr, out_ptr, stride_out_seq,
                  stride_out_head, num_q_heads, num_splits, HEAD_DIM: tl.constexpr,
                  SPLITS_PAD: tl.constexpr, HEAD_DIM_PAD: tl.constexpr):
    seq = tl.program_id(0)
    head = tl.program_id(1)
    split = tl.arange(0, SPLITS_PAD)
    cols = tl.arange(0, HEAD_DIM_PAD)
    split_ok = split < num_splits
    col_ok = cols < HEAD_DIM
    row = ((seq * num_q_heads + head) * num_splits + split).to(tl.int64)
    m = tl.load(partial_max_ptr + row, mask=split_ok, other=float("-inf"))
    l = tl.load(partial_sum_ptr + row, mask=split_ok, other=0.0)
    m_max = tl.max(m, 0)
    m_max = tl.where(m_max == float("-inf"), 0.0, m_max)  # all empty -> weights 0, output 0
    w = tl.exp2(m - m_max)
    denom = tl.sum(w * l, 0)
    acc = tl.load(partial_out_ptr + row[:, None] * HEAD_DIM + cols[None, :],
                  mask=split_ok[:, None] & col_ok[None, :], other=0.0)
    o = tl.sum(acc * w[:, None], 0) / tl.where(denom > 0.0, denom, 1.0)
    tl.store(out_ptr + seq.to(tl.int64) * stride_out_seq + head * stride_out_head + cols,
             o.to(out_ptr.dtype.element_ty), mask=col_ok)


@functools.lru_cache(maxsize=None)
def _num_sms(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def _device_sms(device: torch.device) -> int:
    """SMs of a CUDA device; 4 for the interpreter on the CPU."""
    if device.type != "cuda":
        return 4
    return _num_sms(device.index if device.index is not None else torch.cuda.current_device())


@functools.lru_cache(maxsize=None)
def _device_shared_per_sm(device: torch.device) -> int:
    """Shared memory per SM of a CUDA device (228 KiB on sm_90, as for the interpreter)."""
    if device.type != "cuda":
        return 228 * 1024
    props = torch.cuda.get_device_properties(device)
    return getattr(props, "shared_memory_per_multiprocessor", 228 * 1024)


def default_num_splits(batch: int, num_kv_heads: int, max_keys: int, device: torch.device,
                       tile_n: int = 64) -> int:
    """Enough programs for ~4 waves of the GPU; shape-only, so stable under CUDA graphs."""
    want = cdiv(4 * _device_sms(device), max(1, batch * num_kv_heads))
    return max(1, min(want, cdiv(max(max_keys, 1), tile_n), 64))


def decode_scratch(batch, num_q_heads, head_dim, num_splits, device):
    """Preallocated fp32 scratch (partial acc, max, sum) for paged_decode_attention."""
    f32 = dict(dtype=torch.float32, device=device)
    return (torch.empty(batch, num_q_heads, num_splits, head_dim, **f32),
            torch.empty(batch, num_q_heads, num_splits, **f32),
            torch.empty(batch, num_q_heads, num_splits, **f32))


def paged_decode_attention(q, k_cache, v_cache, block_tables, context_lens, scale,
                           num_splits=None, out=None, scratch=None, tile_n=None,
                           k_scale=None, v_scale=None, num_warps=None, num_stages=None,
                           fp8_operand=None, fp8_v_in_registers=None, maxnreg=None,
                           programs_per_sm=None):
    """Attention of one new query token per request over its paged K/V.

    q:            (B, H_q, D); unit stride on D (B/H strides free).
    k/v_cache:    (NB, b, H_kv, D), same strides (an fp8 V cache may be
                  fp8.transposed_v_view's); any block size b (powers of two tested);
                  H_q % H_kv == 0.
    block_tables: int32 (B, max_blocks), padded with -1 (padding is never read).
    context_lens: int32 (B,), keys visible (current token included); 0 -> output zeros.
    num_splits:   key-range splits per (request, KV head); default from shapes only.
    out:          optional (B, H_q, D) output buffer (q.dtype).
    scratch:      optional decode_scratch(B, H_q, D, num_splits) buffers.
    k/v_scale:    float32 (NB, b, H_kv) for an fp8 cache, else None.
    tile_n, num_warps, num_stages: launch overrides (keys per tile; defaults 64, 4, 2, or
                  fp8_launch.FP8_DECODE for an fp8 cache, E4M3_DECODE for e4m3 MMAs).
    fp8_operand:  dot operand type of an fp8 cache's tiles (fp8_launch.py); None: default;
                  torch.float8_e4m3fn: e4m3 MMAs on the cache bytes (fp8_decode_mma.py;
                  V stored transposed, any group, head dim padded to >= 32, tile_n >= 32).
    fp8_v_in_registers: an fp8 cache's V operand made in registers (True) or read as bytes
                  with the weights on P (False); None: the default (fp8_launch.py).
    maxnreg:      a cap on the split kernel's registers per thread (fp8_launch.Launch);
                  None: the launch's (the compiler's choice by default).
    programs_per_sm: an fp8 cache with V stored transposed read by the flat kernel
                  (fp8_decode_flat.py) with this many programs per SM (an error where it
                  cannot run); 0: the split kernel; None: the launch's (FP8_DECODE's flat
                  kernel where it can run, else the split kernel).
    Returns out (B, H_q, D) in q.dtype. No host sync: CUDA-graph capturable.
    """
    if not use_triton(q):
        reference = paged_decode_attention_reference
        if fp8_operand == FP8_DTYPE and k_scale is not None:
            reference = paged_decode_e4m3_reference  # rounds q and P as that kernel does
        return reference(q, k_cache, v_cache, block_tables, context_lens, scale, out=out,
                         k_scale=k_scale, v_scale=v_scale)
    plan = plan_decode(q, k_cache, v_cache, block_tables, k_scale, v_scale, num_splits,
                       tile_n=tile_n, num_warps=num_warps, num_stages=num_stages,
                       fp8_operand=fp8_operand, fp8_v_in_registers=fp8_v_in_registers,
                       maxnreg=maxnreg, programs_per_sm=programs_per_sm)
    B, H_q, D = q.shape
    num_splits = plan.num_splits
    if q.stride(2) != 1:
        q = q.contiguous()
    if out is None:
        out = torch.empty_like(q, memory_format=torch.contiguous_format)
    if scratch is None:
        scratch = decode_scratch(B, H_q, D, num_splits, q.device)
    partial_out, partial_max, partial_sum = scratch
    assert partial_out.shape == (B, H_q, num_splits, D) and partial_out.is_contiguous()
    assert out.stride(2) == 1
    if B == 0:
        return out
    d_pad = max(16, next_pow2(D))
    if plan.programs:
        paged_decode_flat(q, k_cache, v_cache, k_scale, v_scale, block_tables, context_lens,
                          scale, out, scratch, num_splits, plan.programs, plan.launch,
                          plan.stride_v_head)
    else:
        launch_split_kernel(q, k_cache, v_cache, k_scale, v_scale, block_tables, context_lens,
                            scale, out, scratch, num_splits, plan.launch, plan.quant,
                            plan.v_transposed, plan.stride_v_head, d_pad)
    if num_splits == 1:
        return out
    _merge_kernel[(B, H_q)](
        partial_out, partial_max, partial_sum, out, out.stride(0), out.stride(1), H_q,
        num_splits, HEAD_DIM=D, SPLITS_PAD=max(2, next_pow2(num_splits)), HEAD_DIM_PAD=d_pad,
        num_warps=1 if d_pad <= 128 else 2)
    return out


@dataclass(frozen=True)
class DecodePlan:
    """What paged_decode_attention launches: the resolved launch, the cache's kind and V
    layout, the split count and, for the flat kernel, its grid (None: the split kernel)."""
    launch: Launch
    quant: bool
    v_transposed: bool
    stride_v_head: int
    num_splits: int
    programs: int | None


def plan_decode(q, k_cache, v_cache, block_tables, k_scale=None, v_scale=None,
                num_splits=None, fp8_operand=None, fp8_v_in_registers=None,
                programs_per_sm=None, **overrides) -> DecodePlan:
    """The DecodePlan of a paged_decode_attention call with these arguments (overrides:
    tile_n, num_warps, num_stages, maxnreg); shapes only, so benchmarks size their scratch
    with the split count the call will use."""
    quant = check_scales(k_cache, k_scale) | check_scales(v_cache, v_scale)
    B, _, D = q.shape
    _, bs, H_kv, _ = k_cache.shape
    assert q.shape[1] % H_kv == 0
    v_transposed, stride_v_head = v_layout(k_cache, v_cache)
    check_v_path(v_transposed, fp8_v_in_registers)
    fp8_default = E4M3_DECODE if fp8_operand == FP8_DTYPE else FP8_DECODE
    launch = launch_for(quant, fp8_default, _DECODE, q.dtype, k_cache.dtype, fp8_operand,
                        DECODE_OPERANDS, v_in_registers=fp8_v_in_registers,
                        programs_per_sm=programs_per_sm, **overrides)
    if launch.operand == FP8_DTYPE:  # e4m3 MMAs, keys as rows (fp8_decode_mma.py)
        check_e4m3_launch(v_transposed, launch.tile_n)
    refusal = launch.programs_per_sm and flat_refusal(quant, v_transposed, launch, D, bs)
    if refusal and programs_per_sm:  # asked for by the caller: say why not
        raise ValueError(refusal)
    max_keys = block_tables.shape[1] * bs
    if not launch.programs_per_sm or refusal:  # the split kernel
        if num_splits is None:
            num_splits = default_num_splits(B, H_kv, max_keys, q.device, launch.tile_n)
        return DecodePlan(replace(launch, programs_per_sm=None), quant, v_transposed,
                          stride_v_head, num_splits, None)
    launch = replace(launch, programs_per_sm=flat_programs_per_sm(
        launch, D, _device_shared_per_sm(q.device)))
    sms = _device_sms(q.device)
    if num_splits is None:
        num_splits = flat_num_splits(B, H_kv, cdiv(max_keys, launch.tile_n),
                                     sms * launch.programs_per_sm)
    return DecodePlan(launch, quant, v_transposed, stride_v_head, num_splits,
                      flat_programs(B * H_kv * num_splits, sms, launch.programs_per_sm))


def paged_decode_attention_reference(q, k_cache, v_cache, block_tables, context_lens, scale,
                                     out=None, k_scale=None, v_scale=None, **_):
    """PyTorch reference, batched: gather every request's keys, masked fp32 softmax.

    It is also the CPU path of the engine, hence one gather for the whole batch rather than
    a Python loop per request. Syncs once (the longest context): not CUDA-graph safe.
    """
    B, H_q, D = q.shape
    bs, H_kv = k_cache.shape[1], k_cache.shape[2]
    G = H_q // H_kv
    res = torch.zeros_like(q) if out is None else out.zero_()
    width = math.ceil(int(context_lens.max()) / bs) if B else 0
    if width == 0:
        return res
    pages = block_tables[:, :width].long().clamp(min=0)  # padding is masked below, never used
    k = dequantize_reference(k_cache[pages], None if k_scale is None else k_scale[pages])
    v = dequantize_reference(v_cache[pages], None if v_scale is None else v_scale[pages])
    k, v = k.reshape(B, width * bs, H_kv, D), v.reshape(B, width * bs, H_kv, D)
    scores = torch.einsum("bkgd,bnkd->bkgn", q.float().view(B, H_kv, G, D) * scale, k)
    valid = torch.arange(width * bs, device=q.device)[None, :] < context_lens[:, None].long()
    scores = scores.masked_fill(~valid[:, None, None, :], float("-inf"))
    probs = torch.nan_to_num(scores.softmax(-1), nan=0.0)  # rows with no keys -> zeros
    v = v.masked_fill(~valid[:, :, None, None], 0.0)  # slots past the context may hold anything
    res.copy_(torch.einsum("bkgn,bnkd->bkgd", probs, v).reshape(B, H_q, D))
    return res
