"""The e4m3-MMA decode's numerics in PyTorch (fp8_decode_mma.py's reference, and the CPU path
of EngineConfig.fp8_decode="e4m3"): q and P rounded to two e4m3 terms as the kernel rounds
them, everything else fp32 on the dequantised cache."""
import torch

from zipage.kernels.fp8 import FP8_DTYPE, FP8_MAX


def e4m3_terms_reference(x: torch.Tensor) -> torch.Tensor:
    """fp32 x as e4m3_terms rounds it: hi + lo, hi = e4m3(x), lo = e4m3(x - hi), saturating
    at +-448 like the hardware cast."""
    hi = x.clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE).float()
    return hi + (x - hi).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE).float()


def paged_decode_e4m3_reference(q, k_cache, v_cache, block_tables, context_lens, scale,
                                out=None, k_scale=None, v_scale=None):
    """The e4m3-MMA decode's numerics in PyTorch (its CPU path; shapes as
    paged_decode_attention_reference, fp8 cache only): fp32 attention on the dequantised
    cache with q / s_q (s_q a power of two per head) and P * w rounded to two e4m3 terms,
    w = v_scale / v_max * 256. v_max is the largest V scale of the request's KV head rather
    than of each tile, so single values round differently from the kernel; the rounding's
    size (2^-8 relative) is the same."""
    B, H_q, D = q.shape
    bs, H_kv = k_cache.shape[1], k_cache.shape[2]
    res = torch.zeros_like(q) if out is None else out.zero_()
    width = -(-int(context_lens.max()) // bs) if B else 0
    if width == 0:
        return res
    pages = block_tables[:, :width].long().clamp(min=0)  # padding is masked below
    keys = (B, width * bs, H_kv)
    k = (k_cache[pages].float() * k_scale[pages][..., None]).reshape(*keys, D)
    v_bytes, v_scale = v_cache[pages].float().reshape(*keys, D), v_scale[pages].reshape(keys)
    valid = torch.arange(width * bs, device=q.device)[None, :] < context_lens[:, None].long()
    qf = q.float().view(B, H_kv, H_q // H_kv, D)
    amax = qf.abs().amax(-1, keepdim=True)
    q_scale = torch.exp2(torch.ceil(torch.log2(torch.where(amax > 0, amax, FP8_MAX) / FP8_MAX)))
    qr = e4m3_terms_reference(qf / q_scale) * q_scale
    scores = torch.einsum("bkgd,bnkd->bkgn", qr * scale, k)
    scores = scores.masked_fill(~valid[:, None, None, :], float("-inf"))
    p = torch.nan_to_num(torch.exp(scores - scores.amax(-1, keepdim=True)), nan=0.0)
    v_scale = v_scale.masked_fill(~valid[:, :, None], 0.0).permute(0, 2, 1)  # (B, H_kv, N)
    v_max = v_scale.amax(-1, keepdim=True)
    weight = v_scale / torch.where(v_max > 0, v_max, 1.0) * 256.0
    pw = e4m3_terms_reference(p * weight[:, :, None, :])
    v_bytes = v_bytes.masked_fill(~valid[:, :, None, None], 0.0)  # stale slots: anything
    o = torch.einsum("bkgn,bnkd->bkgd", pw, v_bytes) * (v_max[..., None] / 256.0)
    denom = p.sum(-1, keepdim=True)
    res.copy_(torch.where(denom > 0, o / torch.where(denom > 0, denom, 1.0), 0.0)
              .reshape(B, H_q, D))
    return res
