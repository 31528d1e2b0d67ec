"""A calibration file (``bench calibrate``: results/bench/step_cost_<gpu>_<model>.json): cost
models per engine, block size and KV dtype, the memory the model leaves for the KV pool, and
the measured copy bandwidth.

Configs are keyed ``ENGINE/bBLOCK`` (the model dtype's KV cache) or ``ENGINE/bBLOCK/fp8``
(``kv_cache_dtype="fp8"``): one file can hold both (``bench calibrate --merge``)."""
import json
from pathlib import Path

from zipage.sim.cost_model import CostModel
from zipage.sim.shapes import DeviceMemory

CALIBRATION_FORMAT = "zipage-step-cost/1"
KV_DTYPES = ("auto", "fp8")


def config_key(engine: str, block_size: int, kv_cache_dtype: str = "auto") -> str:
    if kv_cache_dtype not in KV_DTYPES:
        raise ValueError(f"kv_cache_dtype {kv_cache_dtype!r}: expected one of {KV_DTYPES}")
    return f"{engine}/b{block_size}" + ("" if kv_cache_dtype == "auto" else f"/{kv_cache_dtype}")


def parse_key(key: str) -> tuple[str, int, str]:
    """(engine, block size, kv_cache_dtype) of a config key."""
    engine, _, rest = key.partition("/b")
    block, _, kv_dtype = rest.partition("/")
    kv_dtype = kv_dtype or "auto"
    if not engine or not block.isdigit() or kv_dtype not in KV_DTYPES:
        raise ValueError(f"config {key!r} is not ENGINE/bBLOCK or ENGINE/bBLOCK/fp8")
    return engine, int(block), kv_dtype


def nearest_config(models, engine: str, block_size: int, kv_cache_dtype: str = "auto"):
    """The key among ``models`` of this engine and KV dtype nearest in block size (the
    smaller on a tie), or None."""
    mine = {}
    for k in models:
        e, b, d = parse_key(k)
        if e == engine and d == kv_cache_dtype:
            mine[b] = k
    return mine[min(mine, key=lambda b: (abs(b - block_size), b))] if mine else None


class Calibration:
    def __init__(self, path: str):
        self.path = path
        self.data = json.loads(Path(path).read_text())
        if self.data.get("format") != CALIBRATION_FORMAT:
            raise ValueError(f"{path} is not a calibration file of format {CALIBRATION_FORMAT!r} "
                             f"(written by `bench calibrate`)")
        self.gpu, self.model = self.data.get("gpu"), self.data.get("model")
        bw = self.data.get("copy_bandwidth_GBps")
        self.copy_bandwidth_Bps = bw * 1e9 if bw else None
        self.what_if = None  # assume_faster_decode's label, when one is assumed

    def key(self, engine: str, block_size: int, kv_cache_dtype: str = "auto") -> str:
        """The calibrated config of this engine and KV dtype nearest in block size."""
        key = nearest_config(self.data["models"], engine, block_size, kv_cache_dtype)
        if key is None:
            hint = (" (calibrate with `bench calibrate --kv-cache-dtype fp8` on the GPU and "
                    "merge it: `bench calibrate --merge`)" if kv_cache_dtype == "fp8" else "")
            raise ValueError(f"{self.path} has no {engine} cost model with kv_cache_dtype "
                             f"{kv_cache_dtype} (it has {sorted(self.data['models'])}){hint}")
        return key

    def cost(self, engine: str, block_size: int, kv_cache_dtype: str = "auto") -> CostModel:
        key = self.key(engine, block_size, kv_cache_dtype)
        model = CostModel.from_dict(self.data["models"][key])
        model.meta["calibration"] = f"{self.path} [{key}]"
        if key != config_key(engine, block_size, kv_cache_dtype):
            model.meta["block_size_note"] = f"calibrated as {key}, used at block {block_size}"
        return model

    def memory(self, engine: str, block_size: int, total_bytes: int | None = None,
               kv_cache_dtype: str = "auto") -> DeviceMemory | None:
        """The calibrated device (or one of ``total_bytes`` with the same non-KV bytes)."""
        key = self.key(engine, block_size, kv_cache_dtype)
        m = self.data.get("raw", {}).get(key, {}).get("memory", {})
        if "non_kv_bytes" not in m:
            return None
        total = total_bytes or m["total_bytes"]
        return DeviceMemory(total, m["non_kv_bytes"], "calibrated" if total_bytes is None else
                            f"calibrated non-KV bytes on a {total / 2**30:.0f} GiB device")

    def assume_faster_decode(self, kv_cache_dtype: str, speedup: float,
                             programs_per_sm: int | None = None) -> str:
        """A what-if, not a prediction: every config of this KV dtype reads its decode KV
        `speedup` times faster (kv_read_per_mtoken / speedup) and, if given, holds
        programs_per_sm decode programs per SM. Returns the line that labels the results."""
        if speedup <= 0:
            raise ValueError(f"decode speed-up must be positive, got {speedup}")
        keys = [k for k in self.data["models"] if parse_key(k)[2] == kv_cache_dtype]
        if not keys:
            raise ValueError(f"{self.path} has no {kv_cache_dtype} config to change")
        for k in keys:
            model = self.data["models"][k]
            model["device"]["kv_read_per_mtoken"] /= speedup
            if programs_per_sm is not None and "decode_waves" in model:
                model["decode_waves"]["programs_per_sm"] = programs_per_sm
        self.what_if = (f"WHAT-IF, not a prediction: {kv_cache_dtype} decode KV reads "
                        f"{speedup:g}x faster"
                        + ("" if programs_per_sm is None else
                           f", {programs_per_sm} decode programs per SM")
                        + f" ({', '.join(sorted(keys))})")
        return self.what_if
