"""Seeded categorical sampling in one pass over the logits (exponential race, log form).

Row i draws token argmax_v(scores[i, v] / t_i - log(-log u(seed_i, pos_i, v))), which is an
exact sample from softmax(scores[i] / t_i) (Gumbel-max); t_i = 0 means greedy, argmax
scores[i]. u is a counter-based hash of (seed, position, vocab index), so a row's draw never
depends on the batch. In PyTorch the noise alone materialises a dozen (B, V) int64 tensors;
the kernel hashes on the fly and reads the scores once.
"""
import torch

from zipage.kernels._dispatch import tl, triton

_MASK32 = 0xFFFFFFFF
_TILE_V = 2048


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
    return unit_interval(x)


def unit_interval(bits: torch.Tensor) -> torch.Tensor:
    """32 random bits -> float32 in [2**-24, 1 - 2**-24]: the top 23 bits, centred. With 24
    bits the largest value rounds to 1.0 in float32, whose Gumbel noise is +inf: that token
    would be drawn whatever its probability (about 1% of rows at a 150k vocabulary)."""
    return ((bits >> 9).to(torch.float32) + 0.5) * (1.0 / (1 << 23))


def race_scores(scores, temperature, seeds, positions):
    """(B, V) float32 values whose row argmax is the drawn token: scores / t plus Gumbel
    noise on sampled rows, the scores themselves on greedy rows (t = 0)."""
    noise = uniform_noise(seeds, positions, scores.shape[1])
    t = torch.where(temperature > 0, temperature, torch.ones_like(temperature)).unsqueeze(1)
    return torch.where(temperature.unsqueeze(1) > 0, scores / t - torch.log(-torch.log(noise)),
                       scores)


def sample_tokens_reference(scores, temperature, seeds, positions):
    """PyTorch version of sample_tokens."""
    return race_scores(scores, temperature, seeds, positions).argmax(dim=-1)


@triton.jit
def _mix32(x):
    x = (x ^ (x >> 16)) * 0x45D9F3B
    x = (x ^ (x >> 16)) * 0x45D9F3B
    return x ^ (x >> 16)


# the row stride is not specialised: one compiled variant for every logits layout
@triton.jit(do_not_specialize=["stride_scores_row"])
def _sample_kernel(scores_ptr, out_ptr, temperature_ptr, seeds_ptr, positions_ptr, vocab_size,
                   stride_scores_row, TILE_V: tl.constexpr):
    row = tl.program_id(0)
    t = tl.load(temperature_ptr + row)
    greedy = t <= 0.0
    t = tl.where(greedy, 1.0, t)
    seed = tl.load(seeds_ptr + row).to(tl.uint32)
    pos = tl.load(positions_ptr + row).to(tl.uint32)
    row_hash = _mix32(_mix32(seed * 0x2545F49 + 0x9E3779B) ^ (pos * 0x27D4EB2D))
    best = tl.full([TILE_V], float("-inf"), tl.float32)
    best_v = tl.zeros([TILE_V], tl.int32)
    for v0 in range(0, vocab_size, TILE_V):
        v = v0 + tl.arange(0, TILE_V)
        ok = v < vocab_size
        s = tl.load(scores_ptr + row.to(tl.int64) * stride_scores_row + v, mask=ok,
                    other=float("-inf"))
        s = s.to(tl.float32)
        if not greedy:
            x = _mix32(row_hash ^ (v.to(tl.uint32) * 0x165667B1))
            u = ((x >> 9).to(tl.float32) + 0.5) * (1.0 / 8388608.0)  # as unit_interval
            s = s / t - tl.log(-tl.log(u))
        better = s > best  # strict: the first index wins among equal scores in a lane
        best_v = tl.where(better, v, best_v)
        best = tl.where(better, s, best)
    top = tl.max(best, 0)
    first = tl.min(tl.where(best == top, best_v, vocab_size), 0)  # lowest index among maxima
    tl.store(out_ptr + row, first.to(tl.int64))


def sample_tokens(scores, temperature, seeds, positions):
    """One token per row (Triton).

    scores:      (B, V) float32/bf16, last dim contiguous (logits, or log-probabilities
                 with -inf for filtered tokens)
    temperature: (B,) float32, 0 = greedy;  seeds, positions: (B,) int64
    returns      (B,) int64 token ids
    """
    B, V = scores.shape
    assert scores.stride(1) == 1
    out = torch.empty(B, dtype=torch.int64, device=scores.device)
    if B:
        _sample_kernel[(B,)](scores, out, temperature, seeds, positions, V, scores.stride(0),
                             TILE_V=_TILE_V, num_warps=8)
    return out
