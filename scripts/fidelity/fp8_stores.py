"""The simulated KV storages of `bench fp8-fidelity` (fp8.py): wrappers around the engine's
KV write that round K/V before it stores them, in the model-dtype cache. SimulatedStore
rounds to e4m3 with static scales (and, without scales, records the amax that calibrates
them); RoundedStore sends K and V through the roundings of ROUNDED."""
import torch

import zipage.layers.attention as attention_mod
from zipage.kernels.fp8 import FP8_DTYPE, FP8_MAX


class SimulatedStore:
    """Wraps the engine's KV write: K/V rounded to e4m3 with static scales first. Layers are
    called in order once per forward, so a counter mod L identifies the layer."""

    def __init__(self, num_layers: int, scales=None):
        self.L, self.scales, self.calls = num_layers, scales, 0
        self.amax = None  # calibration: running |x| max per (K/V, layer, head)
        self.original = attention_mod.store_kv

    def __call__(self, key, value, k_cache, v_cache, slot_mapping, k_scale=None,
                 v_scale=None):
        layer = self.calls % self.L
        self.calls += 1
        if self.scales is None:  # calibrating: record, store unchanged
            a = torch.stack([key.abs().amax((0, 2)), value.abs().amax((0, 2))])
            if self.amax is None:
                self.amax = torch.zeros(2, self.L, a.shape[1])
            self.amax[:, layer] = torch.maximum(self.amax[:, layer], a)
        else:
            key, value = (fake_fp8(x, self.scales[i, layer]) for i, x in enumerate((key, value)))
        return self.original(key, value, k_cache, v_cache, slot_mapping, k_scale, v_scale)


def _round_to(dtype):
    return lambda x: x.to(dtype).to(x.dtype)


def _engine_fp8(x):
    """x through the engine's e4m3 (scale per row of D), back in x's dtype."""
    from zipage.kernels.fp8 import dequantize_reference, quantize_reference
    return dequantize_reference(*quantize_reference(x)).to(x.dtype)


class RoundedStore:
    """Wraps the engine's KV write: K and V through `round_k` / `round_v` first (None: as
    they are; the cache dtype is unchanged)."""

    def __init__(self, round_k, round_v):
        self.round_k, self.round_v = round_k, round_v
        self.original = attention_mod.store_kv

    def __call__(self, key, value, *args, **kwargs):
        key = self.round_k(key) if self.round_k else key
        value = self.round_v(value) if self.round_v else value
        return self.original(key, value, *args, **kwargs)


def _engine_fp8_rotated(x):
    """x through the engine's e4m3 in the Hadamard-rotated basis, rotated back: what q.k
    sees when q and k are both rotated (zipage/layers/key_rotation.py)."""
    from zipage.layers.key_rotation import rotate
    return rotate(_engine_fp8(rotate(x)))


ROUNDED = {"bf16": (_round_to(torch.bfloat16), _round_to(torch.bfloat16)),
           "fp8_k": (_engine_fp8, None), "fp8_v": (None, _engine_fp8),
           "fp8_rot": (_engine_fp8_rotated, _engine_fp8), "fp8_k_rot": (_engine_fp8_rotated, None)}


def fake_fp8(x, scale):
    """x (T, H, D) through e4m3 with scale (H,) or a scalar tensor (saturating)."""
    s = scale.reshape(1, -1, 1) if scale.dim() else scale
    q = (x.float() / s).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE)
    return (q.float() * s).to(x.dtype)
