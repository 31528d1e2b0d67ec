"""Sampling: greedy, temperature, top-k, top-p, min-p, with per-request reproducible noise.

The random draw of a row depends only on (seed, position), never on the batch: the noise is
a counter-based hash of (seed, position, vocab index), and sampling uses the exponential
race in log form (Gumbel-max), which is exact categorical sampling
(zipage.kernels.sample: a one-pass Triton kernel, PyTorch on the CPU).
"""
import torch

from zipage.kernels._dispatch import use_triton
from zipage.kernels.sample import sample_tokens, sample_tokens_reference, uniform_noise

__all__ = ["sample", "uniform_noise"]


def sample(logits: torch.Tensor, temperature: torch.Tensor, top_k: torch.Tensor,
           top_p: torch.Tensor, min_p: torch.Tensor, seeds: torch.Tensor,
           positions: torch.Tensor, all_greedy: bool, use_min_p: bool,
           use_top_k_p: bool) -> torch.Tensor:
    """logits (B, V) float32; per-row settings (B,); temperature 0 = greedy -> (B,) int64.

    The three flags are known on the host; passing them avoids device syncs.
    """
    if all_greedy:
        return logits.argmax(dim=-1)
    draw = sample_tokens if use_triton(logits) else sample_tokens_reference
    if not (use_min_p or use_top_k_p):
        return draw(logits, temperature, seeds, positions)
    t = torch.where(temperature > 0, temperature, torch.ones_like(temperature))
    probs = _filter(torch.softmax(logits / t.unsqueeze(1), dim=-1), top_k, top_p, min_p,
                    use_min_p, use_top_k_p)
    sampled = draw(torch.log(probs), (temperature > 0).to(temperature.dtype), seeds, positions)
    return torch.where(temperature > 0, sampled, logits.argmax(dim=-1))


def _filter(probs, top_k, top_p, min_p, use_min_p, use_top_k_p):
    if use_min_p:
        probs = probs.masked_fill(probs < min_p.unsqueeze(1) * probs.max(-1, keepdim=True).values, 0)
    if use_top_k_p:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        rank = torch.arange(probs.shape[1], device=probs.device).unsqueeze(0)
        k = torch.where(top_k > 0, top_k, torch.full_like(top_k, probs.shape[1])).unsqueeze(1)
        mass_before = sorted_p.cumsum(-1) - sorted_p
        drop = (rank >= k) | (mass_before >= top_p.unsqueeze(1) * sorted_p.sum(-1, keepdim=True))
        drop[:, 0] = False  # the most likely token always survives
        probs = probs.scatter(1, order, sorted_p.masked_fill(drop, 0))
    return probs
