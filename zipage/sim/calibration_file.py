"""A calibration file (``bench calibrate``: results/bench/step_cost_<gpu>_<model>.json): cost
models per engine and block size, the memory the model leaves for the KV pool, and the
measured copy bandwidth."""
import json
from pathlib import Path

from zipage.sim.cost_model import CostModel
from zipage.sim.shapes import DeviceMemory

CALIBRATION_FORMAT = "zipage-step-cost/1"


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

    def key(self, engine: str, block_size: int) -> str:
        """The calibrated config of this engine nearest in block size."""
        mine = {int(k.split("/b")[1]): k for k in self.data["models"]
                if k.startswith(engine + "/b")}
        if not mine:
            raise ValueError(f"{self.path} has no {engine} cost model "
                             f"(it has {sorted(self.data['models'])})")
        return mine[min(mine, key=lambda b: (abs(b - block_size), b))]

    def cost(self, engine: str, block_size: int) -> CostModel:
        key = self.key(engine, block_size)
        model = CostModel.from_dict(self.data["models"][key])
        model.meta["calibration"] = f"{self.path} [{key}]"
        if key != f"{engine}/b{block_size}":
            model.meta["block_size_note"] = f"calibrated as {key}, used at block {block_size}"
        return model

    def memory(self, engine: str, block_size: int,
               total_bytes: int | None = None) -> DeviceMemory | None:
        """The calibrated device (or one of ``total_bytes`` with the same non-KV bytes)."""
        m = self.data.get("raw", {}).get(self.key(engine, block_size), {}).get("memory", {})
        if "non_kv_bytes" not in m:
            return None
        total = total_bytes or m["total_bytes"]
        return DeviceMemory(total, m["non_kv_bytes"], "calibrated" if total_bytes is None else
                            f"calibrated non-KV bytes on a {total / 2**30:.0f} GiB device")
