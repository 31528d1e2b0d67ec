"""`calibrate --host-from-trace`: the schedule and post phases (host work outside the runner)
refitted to a measured run's steps, carried to every block size of the engine through the
same terms; device, launch and start stay the grid's; the traced run's options mark it
in-sample."""
import json

import pytest

from scripts import bench
from zipage.sim.calibration_file import CALIBRATION_FORMAT, Calibration
from zipage.sim.cost_model import CostModel, LinearModel
from zipage.sim.features import StepFeatures
from zipage.sim.host_refit import refit_host
from zipage.sim.trace import COLUMNS, FEATURES, write_traces

SCHEDULE = lambda f: 2e-5 + 5e-6 * f.rows + 3e-4 * f.table_blocks / 1e3  # noqa: E731
POST = lambda f: 1e-5 + 1.5e-6 * f.rows  # noqa: E731
OPTIONS = {"block_size": 32, "async_scheduling": False, "kv_cache_tokens": 4096}


def steps() -> list[StepFeatures]:
    return [StepFeatures(decode_rows=n, kv_read_tokens=n * ctx, table_blocks=n * (ctx // 32))
            for n in (4, 16, 64, 192) for ctx in (128, 1024, 2048)]


def record(f: StepFeatures) -> dict:
    d = f.as_dict()
    return {**{k: d[k] for k in FEATURES}, "schedule_s": SCHEDULE(f), "launch_s": 1e-3,
            "wait_s": 8e-3, "post_s": POST(f), "end": 0.0, "device_s": 0.01,
            "compression_s": 0.0}


def base_model() -> CostModel:
    host = {p: LinearModel({"base": 1e-5, "per_row": 1e-6, "table_per_kblock": 0.0,
                            "prefill_per_ktoken": 7e-3}) for p in ("schedule", "launch", "post")}
    host["start"] = LinearModel({"base": 2e-4, "per_row": 3e-6})
    return CostModel(LinearModel({"rows@1": 0.005, "rows@256": 0.008}, (1, 256)), host,
                     {"engine": "fullkv"})


def test_refit_host_recovers_the_traced_phases_and_keeps_the_rest():
    base = base_model()
    model = refit_host(base, [{"path": "t.json.gz", "options": OPTIONS,
                               "records": [record(f) for f in steps()]}])
    for f in steps() + [StepFeatures(decode_rows=256, table_blocks=512)]:  # and at block 256
        assert model.host_s("schedule", f) == pytest.approx(SCHEDULE(f), rel=1e-6)
        assert model.host_s("post", f) == pytest.approx(POST(f), rel=1e-6)
    # no traced step prefills: that term keeps the base's coefficient
    assert model.host["schedule"].coefficients["prefill_per_ktoken"] == 7e-3
    assert model.device is base.device
    assert model.host["launch"] is base.host["launch"] and model.host["start"] is base.host["start"]
    assert model.meta["fitted_options"] == [OPTIONS]
    assert model.meta["host_fitted_to"] == ["t.json.gz"]
    assert model.meta["fit"]["schedule_trace"]["points"] == len(steps())


def test_host_from_trace_cli_refits_every_block_size_of_the_engine(tmp_path):
    models = {k: base_model().to_dict() for k in ("fullkv/b256", "fullkv/b32", "zipage/b256")}
    cal, trace, out = tmp_path / "cal.json", tmp_path / "t.json", tmp_path / "out.json"
    cal.write_text(json.dumps({"format": CALIBRATION_FORMAT, "model": "tiny", "gpu": "test",
                               "models": models}))
    rows = [[record(f)[c] for c in COLUMNS] for f in steps()]
    write_traces(str(trace), {"fullkv": {"options": OPTIONS, "columns": COLUMNS, "rows": rows}})
    assert bench.main(["calibrate", "--host-from-trace", str(trace), "--host-configs",
                       "fullkv/b256", "--base", str(cal), "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["models"]["fullkv/b32"] == models["fullkv/b32"]  # not in --host-configs
    assert data["models"]["zipage/b256"] == models["zipage/b256"]  # another engine
    f = StepFeatures(decode_rows=256, table_blocks=512)
    cost = Calibration(str(out)).cost("fullkv", 256)
    assert cost.host_s("schedule", f) == pytest.approx(SCHEDULE(f), rel=1e-6)
    assert cost.meta["fitted_options"] == [OPTIONS]
    assert data["host_refitted_from"] == {"traces": [str(trace)], "engines": ["fullkv"],
                                          "configs": ["fullkv/b256"]}
