"""Refits of a calibration file on the CPU: `calibrate --add-start` from the raw grid of a
small synthetic calibration, and `--from-trace` with the grid as the fallback (a knot at the
traced batch size, untraced host terms kept, the idle start of synchronous traces removed)."""
import json

import pytest

from scripts import bench
from zipage.sim.calibration_file import CALIBRATION_FORMAT, Calibration
from zipage.sim.cost_model import CostModel, LinearModel, fixed_cost_model
from zipage.sim.features import StepFeatures
from zipage.sim.refit import frequent_rows, refit_from_traces
from zipage.sim.trace import FEATURES

START = lambda n: 2e-4 + 5e-6 * n  # noqa: E731  the grid's true idle start
# true device time: a table over rows (with a bump at 6 rows) plus KV read
TABLE = {1: 0.005, 6: 0.0075, 8: 0.006}
device_truth = lambda n, kv: {1: 0.005, 8: 0.006}.get(n, TABLE.get(n)) + 0.02 * kv / 1e6  # noqa: E731


def grid() -> list[dict]:
    pts = []
    for n in (1, 8):
        for ctx in (64, 512, 4096):
            f = StepFeatures(decode_rows=n, kv_read_tokens=n * ctx)
            busy = device_truth(n, f.kv_read_tokens)
            pts.append({"name": f"decode {n}x{ctx}", "features": f.as_dict(),
                        "device_s": [busy + START(n), busy, busy], "launch_s": [0.001]})
    return pts


def calibration(tmp_path) -> str:
    base = fixed_cost_model().to_dict()
    base["row_knots"], base["device"] = [1, 8], {"rows@1": 0.005, "rows@8": 0.006,
                                                  "kv_read_per_mtoken": 0.02}
    data = {"format": CALIBRATION_FORMAT, "model": "tiny", "gpu": "test",
            "models": {"fullkv/b16": base}, "raw": {"fullkv/b16": {"grid": grid()}}}
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_add_start_fits_the_grid_and_keeps_the_rest(tmp_path):
    base, out = calibration(tmp_path), tmp_path / "out.json"
    assert bench.main(["calibrate", "--add-start", "--base", base, "--out", str(out)]) == 0
    before = json.loads(open(base).read())["models"]["fullkv/b16"]
    after = json.loads(out.read_text())["models"]["fullkv/b16"]
    assert {p: after["host"][p] for p in before["host"]} == before["host"]
    assert after["device"] == before["device"]
    cost = Calibration(str(out)).cost("fullkv", 16)
    for n in (1, 4, 8):
        assert cost.host_s("start", StepFeatures(decode_rows=n)) == pytest.approx(START(n),
                                                                                 rel=1e-9)
    assert after["meta"]["fit"]["start"]["points"] == 2 * 3


def record(n: int, kv: int, device_s: float, schedule_s: float = 3e-4) -> dict:
    f = StepFeatures(decode_rows=n, kv_read_tokens=kv).as_dict()
    return {**{k: f[k] for k in FEATURES}, "schedule_s": schedule_s, "launch_s": 1e-3,
            "wait_s": 5e-3, "post_s": 2e-4, "end": 0.0, "device_s": device_s,
            "compression_s": 0.0}


def base_model() -> CostModel:
    host = {p: LinearModel({"base": b, "per_row": 1e-6, "prefill_per_ktoken": 7e-3})
            for p, b in (("schedule", 1e-4), ("launch", 1e-3), ("post", 1e-4))}
    host["start"] = LinearModel({"base": 2e-4, "per_row": 5e-6})
    return CostModel(LinearModel({"rows@1": 0.005, "rows@8": 0.006,
                                  "kv_read_per_mtoken": 0.02}, (1, 8)), host)


@pytest.mark.parametrize("async_scheduling", [True, False])
def test_refit_adds_a_knot_where_the_run_held_its_batch(async_scheduling):
    base = base_model()
    kvs = (300, 900, 1500, 2100)
    # a synchronous step's CUDA events include the idle start: the refit takes it off again
    idle = 0.0 if async_scheduling else START(6)
    recs = [record(6, kv, device_truth(6, kv) + idle) for kv in kvs for _ in range(3)]
    assert frequent_rows(recs) == {6}
    trace = {"path": "t.json.gz", "options": {"async_scheduling": async_scheduling},
             "records": recs}
    model = refit_from_traces(base, grid(), [trace])
    assert model.device.row_knots == (1, 6, 8)
    for n, kv in [(6, 1200), (1, 64), (8, 32768)]:
        f = StepFeatures(decode_rows=n, kv_read_tokens=kv)
        assert model.device_s(f) == pytest.approx(device_truth(n, kv), rel=1e-6)
    # interpolating the grid alone misses the bump at 6 rows
    assert base.device_s(StepFeatures(decode_rows=6)) < 0.0058
    sched = model.host["schedule"]
    assert sched(StepFeatures(decode_rows=6)) == pytest.approx(3e-4, rel=1e-9)
    assert sched.coefficients["prefill_per_ktoken"] == 7e-3  # untraced term: the base's
    assert model.host["start"] is base.host["start"]  # a trace cannot see it: the grid's
    assert model.meta["fitted_options"] == [{"async_scheduling": async_scheduling}]
