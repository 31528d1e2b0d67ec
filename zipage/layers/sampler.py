"""Sampling: greedy, temperature, top-k, top-p, min-p, with per-request reproducible noise.

The random draw of a row depends only on (seed, position), never on the batch: the noise is
a counter-based hash of (seed, position, vocab index), and sampling uses the exponential
race (argmax p / E, E ~ Exp(1)), which is exact categorical sampling.
"""
import torch

_MASK32 = 0xFFFFFFFF


def _mix(x: torch.Tensor) -> torch.Tensor:
    # Multipliers < 2**31 keep every product of a 32-bit value inside int64.
    x = x & _MASK32
    x = ((x ^ (x >> 16)) * 0x45D9F3B) & _MASK32
    x = ((x ^ (x >> 16)) * 0x45D9F3B) & _MASK32
    return x ^ (x >> 16)


def uniform_noise(seeds: torch.Tensor, positions: torch.Tensor, vocab: int) -> torch.Tensor:
    """(B,) int64 seeds and positions -> (B, vocab) float32 in (0, 1)."""
    cols = torch.arange(vocab, device=seeds.device, dtype=torch.int64)
    row = _mix(_mix((seeds & _MASK32) * 0x2545F49 + 0x9E3779B) ^ (positions * 0x27D4EB2D))
    x = _mix(row.unsqueeze(1) ^ (cols * 0x165667B1).unsqueeze(0))
    return ((x >> 8).to(torch.float32) + 0.5) * (1.0 / (1 << 24))


def sample(logits: torch.Tensor, temperature: torch.Tensor, top_k: torch.Tensor,
           top_p: torch.Tensor, min_p: torch.Tensor, seeds: torch.Tensor,
           positions: torch.Tensor, all_greedy: bool, use_min_p: bool,
           use_top_k_p: bool) -> torch.Tensor:
    """logits (B, V) float32; per-row settings (B,); temperature 0 = greedy -> (B,) int64.

    The three flags are known on the host; passing them avoids device syncs.
    """
    greedy = logits.argmax(dim=-1)
    if all_greedy:
        return greedy
    t = torch.where(temperature > 0, temperature, torch.ones_like(temperature))
    probs = torch.softmax(logits / t.unsqueeze(1), dim=-1)
    probs = _filter(probs, top_k, top_p, min_p, use_min_p, use_top_k_p)
    noise = uniform_noise(seeds, positions, logits.shape[1])
    sampled = (probs / -torch.log(noise)).argmax(dim=-1)
    return torch.where(temperature > 0, sampled, greedy)


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
