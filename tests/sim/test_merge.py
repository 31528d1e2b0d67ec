"""`calibrate --merge`: a config calibrated alone in another call joins the main calibration
as it was measured (model and raw timings), with its provenance; --add-start then fits only
the merged config's start phase; files of another GPU or a config the base already has are
refused."""
import json

import pytest

from scripts import bench
from zipage.sim.calibration_file import CALIBRATION_FORMAT, Calibration
from zipage.sim.cost_model import fixed_cost_model
from zipage.sim.features import StepFeatures
from zipage.sim.merge import merge_configs

START = lambda n: 3e-4 + 2e-6 * n  # noqa: E731  the merged grid's true idle start


def grid() -> list[dict]:
    pts = []
    for n in (1, 8, 64):
        f = StepFeatures(decode_rows=n, kv_read_tokens=n * 256)
        busy = 0.005 + 1e-5 * n
        pts.append({"name": f"decode {n}x256", "features": f.as_dict(),
                    "device_s": [busy + START(n), busy, busy], "launch_s": [0.001]})
    return pts


def calibration(configs: list[str], gpu: str = "H200", with_grid: bool = True) -> dict:
    return {"format": CALIBRATION_FORMAT, "model": "tiny", "gpu": gpu,
            "environment": {"zipage_commit": "abc1234", "nvidia_smi": "smi line"},
            "copy_bandwidth_GBps": 4000.0, "seconds": 40.0,
            "models": {k: fixed_cost_model().to_dict() for k in configs},
            "raw": {k: {"grid": grid() if with_grid else [], "memory": {"num_blocks": 7}}
                    for k in configs}}


def test_merge_then_add_start_touches_only_the_merged_config(tmp_path):
    base, other, out = (tmp_path / n for n in ("base.json", "b32.json", "out.json"))
    base.write_text(json.dumps(calibration(["fullkv/b256", "zipage/b256"])))
    other.write_text(json.dumps(calibration(["zipage/b32"])))
    assert bench.main(["calibrate", "--merge", str(other), "--merge-note", "alone, same day",
                       "--add-start", "--base", str(base), "--out", str(out)]) == 0
    before, after = json.loads(base.read_text()), json.loads(out.read_text())
    for key in ("fullkv/b256", "zipage/b256"):  # the base's configs: as they were (no start)
        assert after["models"][key] == before["models"][key]
        assert "start" not in after["models"][key]["host"]
    merged = after["models"]["zipage/b32"]
    assert merged["device"] == fixed_cost_model().to_dict()["device"]
    assert merged["meta"]["calibrated_in"] == str(other)
    assert after["raw"]["zipage/b32"] == calibration(["zipage/b32"])["raw"]["zipage/b32"]
    assert after["merged"] == [{"config": "zipage/b32", "from": str(other), "gpu": "H200",
                                "zipage_commit": "abc1234", "copy_bandwidth_GBps": 4000.0,
                                "nvidia_smi": "smi line", "seconds": 40.0,
                                "note": "alone, same day"}]
    cost = Calibration(str(out)).cost("zipage", 32)
    for n in (1, 8, 64):
        assert cost.host_s("start", StepFeatures(decode_rows=n)) == pytest.approx(START(n),
                                                                                 rel=1e-9)


def test_merge_refuses_another_gpu_and_a_config_the_base_has():
    with pytest.raises(ValueError, match="gpu 'A100' differs"):
        merge_configs(calibration(["fullkv/b256"]), calibration(["zipage/b32"], gpu="A100"),
                      "a100.json", log=lambda *_: None)
    with pytest.raises(ValueError, match="already has fullkv/b256"):
        merge_configs(calibration(["fullkv/b256"]), calibration(["fullkv/b256"]), "x.json",
                      log=lambda *_: None)
    with pytest.raises(ValueError, match="no config zipage/b16"):
        merge_configs(calibration(["fullkv/b256"]), calibration(["zipage/b32"]), "x.json",
                      keys=["zipage/b16"], log=lambda *_: None)


def test_replace_recalibrates_a_config_and_keeps_what_it_replaced(tmp_path):
    base, first, second, out = (tmp_path / n for n in ("base.json", "f1.json", "f2.json",
                                                       "out.json"))
    base.write_text(json.dumps(calibration(["fullkv/b256"])))
    first.write_text(json.dumps(calibration(["fullkv/b256/fp8"])))
    assert bench.main(["calibrate", "--merge", str(first), "--base", str(base),
                       "--out", str(out)]) == 0
    redone = calibration(["fullkv/b256/fp8"])
    redone["environment"]["zipage_commit"] = "def5678"
    redone["models"]["fullkv/b256/fp8"]["device"]["base"] = 0.123
    second.write_text(json.dumps(redone))
    with pytest.raises(SystemExit, match="--replace to recalibrate"):
        bench.main(["calibrate", "--merge", str(second), "--base", str(out), "--out", str(out)])
    assert bench.main(["calibrate", "--merge", str(second), "--replace", "--base", str(out),
                       "--out", str(out)]) == 0
    after = json.loads(out.read_text())
    assert after["models"]["fullkv/b256/fp8"]["device"]["base"] == 0.123
    assert after["models"]["fullkv/b256"] == calibration(["fullkv/b256"])["models"]["fullkv/b256"]
    [record] = after["merged"]
    assert (record["from"], record["zipage_commit"]) == (str(second), "def5678")
    assert (record["replaces"]["from"], record["replaces"]["zipage_commit"]) == (str(first),
                                                                                  "abc1234")


def test_replace_without_merge_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="give --merge"):
        bench.main(["calibrate", "--replace", "--base", "x.json", "--out", str(tmp_path / "o")])
