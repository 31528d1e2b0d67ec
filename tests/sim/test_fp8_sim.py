"""FP8 KV in the simulator, on the CPU with a synthetic FP8 calibration: configs keyed by KV
dtype live in one file, `simulate --kv-cache-dtype fp8` takes the FP8 step costs and the FP8
pool, `--validate` predicts a measured FP8 run with them, and `--paper` states Zipage FP8
against Full KV bf16 next to bf16 / bf16."""
import copy
import json

import pytest
import torch

from scripts import bench
from zipage.config import EngineConfig
from zipage.sim.calibration_file import Calibration, config_key, parse_key
from zipage.sim.cost_model import fixed_cost_model
from zipage.sim.shapes import DeviceMemory, model_spec, plan_pool

GIB = 2**30
MEMORY = {"total_bytes": 40 * GIB, "non_kv_bytes": 34 * GIB}  # 2 GiB of pool at 0.9


def cost_dict(device_scale: float) -> dict:
    """Stated step costs with no host time: a step's virtual time is its device time."""
    d = fixed_cost_model().to_dict()
    d["device"] = {k: v * device_scale for k, v in d["device"].items()}
    d["host"] = {p: {k: 0.0 for k in c} for p, c in d["host"].items()}
    return d


def calibration(kv_dtypes=("auto", "fp8"), block=16) -> dict:
    """bf16 configs at the stated costs, FP8 configs at half of them."""
    models, raw = {}, {}
    for kv in kv_dtypes:
        for engine in ("fullkv", "zipage"):
            key = config_key(engine, block, kv)
            models[key] = cost_dict(0.5 if kv == "fp8" else 1.0)
            raw[key] = {"memory": dict(MEMORY)}
    return {"format": "zipage-step-cost/1", "gpu": "test GPU", "model": "qwen3-8b",
            "copy_bandwidth_GBps": 4000.0, "models": models, "raw": raw}


def test_config_keys_carry_the_kv_dtype():
    assert config_key("zipage", 256) == "zipage/b256"
    assert config_key("zipage", 256, "fp8") == "zipage/b256/fp8"
    assert parse_key("zipage/b256/fp8") == ("zipage", 256, "fp8")
    assert parse_key("fullkv/b32") == ("fullkv", 32, "auto")
    for bad in ("zipage/b256/int4", "zipage", "zipage/bx"):
        with pytest.raises(ValueError, match="ENGINE/bBLOCK"):
            parse_key(bad)


def test_fp8_picks_the_fp8_configs_and_the_fp8_pool(tmp_path):
    cal = tmp_path / "cal.json"
    cal.write_text(json.dumps(calibration()))
    runs = {}
    for kv in ("auto", "fp8"):
        out = tmp_path / f"{kv}.json"
        assert bench.main(["simulate", "--cost", str(cal), "--kv-cache-dtype", kv,
                           "--num-requests", "16", "--output-len", "200", "--budget", "64",
                           "--block-size", "16", "--max-num-seqs", "16", "--json",
                           str(out)]) == 0
        runs[kv] = json.loads(out.read_text())
    spec, mem = model_spec("qwen3-8b"), DeviceMemory(**MEMORY, source="test")
    for engine in ("fullkv", "zipage"):
        bf16, fp8 = runs["auto"][engine], runs["fp8"][engine]
        assert fp8["options"]["kv_cache_dtype"] == "fp8"
        pools = {}
        for kv, run in (("auto", bf16), ("fp8", fp8)):  # the engine's own pool arithmetic
            cfg = EngineConfig.from_kwargs("qwen3-8b", **run["options"])
            plan = plan_pool(spec, cfg, torch.bfloat16, cfg.max_model_len, mem)
            assert run["pool_tokens"] == plan.num_blocks * 16
            pools[kv] = run["pool_tokens"]
        assert pools["fp8"] / pools["auto"] == pytest.approx(1.93, abs=0.01)
        # no preemption in either pool, the same steps: FP8 steps cost half (its configs)
        assert fp8["steps"] == bf16["steps"] and fp8["preemptions"] == bf16["preemptions"] == 0
        assert fp8["wall_time_s"] == pytest.approx(bf16["wall_time_s"] / 2)


def test_fp8_without_fp8_configs_is_refused(tmp_path):
    cal = tmp_path / "cal.json"
    cal.write_text(json.dumps(calibration(kv_dtypes=("auto",))))
    with pytest.raises(SystemExit, match="no fullkv cost model with kv_cache_dtype fp8.*"
                                         "bench calibrate --kv-cache-dtype fp8"):
        bench.main(["simulate", "--cost", str(cal), "--kv-cache-dtype", "fp8",
                    "--num-requests", "4", "--output-len", "50"])
    assert Calibration(str(cal)).key("zipage", 256) == "zipage/b16"


def test_a_measured_fp8_run_is_predicted_with_the_fp8_configs(tmp_path):
    """`bench long --kv-cache-dtype fp8` (CPU), then an FP8 calibration merged into a bf16
    one, then `simulate --validate`: the engine's exact counts, on the FP8 step costs."""
    report, out = tmp_path / "fp8_long.json", tmp_path / "validation.json"
    assert bench.main(["long", "--cpu-smoke", "--kv-cache-dtype", "fp8", "--json",
                       str(report)]) == 0
    measured = json.loads(report.read_text())
    assert measured["fullkv"]["options"]["kv_cache_dtype"] == "fp8"
    bf16, fp8, both = (tmp_path / f"{n}.json" for n in ("bf16", "fp8", "both"))
    full = calibration()
    bf16.write_text(json.dumps(dict(full, models={k: v for k, v in full["models"].items()
                                                  if not k.endswith("/fp8")})))
    only_fp8 = copy.deepcopy(full)
    only_fp8["models"] = {k: v for k, v in full["models"].items() if k.endswith("/fp8")}
    fp8.write_text(json.dumps(only_fp8))
    with pytest.raises(ValueError, match="kv_cache_dtype fp8"):
        bench.main(["simulate", "--cost", str(bf16), "--validate", str(report)])
    assert bench.main(["calibrate", "--merge", str(fp8), "--base", str(bf16), "--out",
                       str(both)]) == 0
    assert sorted(json.loads(both.read_text())["models"]) == [
        "fullkv/b16", "fullkv/b16/fp8", "zipage/b16", "zipage/b16/fp8"]
    assert bench.main(["simulate", "--cost", str(both), "--validate", str(report), "--json",
                       str(out)]) in (0, 1)  # 1: stated costs, not the CPU's
    result = json.loads(out.read_text())["validation"][0]
    for r in result["rows"]:
        if r["engine"] != "speedup":
            for k in ("steps", "preemptions", "compressions"):
                assert r[f"{k}_measured"] == r[f"{k}_predicted"], (r["engine"], k)
    predicted = result["predicted"]["fullkv"]
    assert predicted["options"]["kv_cache_dtype"] == "fp8"
    assert predicted["pool_tokens"] == measured["fullkv"]["pool_tokens"]
    # FP8 configs as costly as the bf16 ones: twice the predicted time, so FP8 ones were used
    same = tmp_path / "same.json"
    data = json.loads(both.read_text())
    for k in ("fullkv/b16/fp8", "zipage/b16/fp8"):
        data["models"][k] = cost_dict(1.0)
    same.write_text(json.dumps(data))
    assert bench.main(["simulate", "--cost", str(same), "--validate", str(report), "--json",
                       str(out)]) in (0, 1)
    slower = json.loads(out.read_text())["validation"][0]["predicted"]
    for engine in ("fullkv", "zipage"):
        assert slower[engine]["wall_time_s"] == pytest.approx(
            2 * result["predicted"][engine]["wall_time_s"])


def test_paper_states_zipage_fp8_against_full_kv_bf16(tmp_path, capsys):
    plot, out = tmp_path / "speedup.png", tmp_path / "paper.json"
    assert bench.main(["simulate", "--paper", "--fixed-cost", "--kv-cache-dtype", "fp8",
                       "--num-requests", "32", "--mean-output-len", "300", "--budget", "256",
                       "--sweep-means", "300", "--sweep-budgets", "256", "--gpu-memory-gib", "80",
                       "--plot", str(plot), "--json", str(out)]) == 0
    reports = json.loads(out.read_text())["reports"]
    assert {"paper", "paper_fp8", "paper_zipage_fp8_vs_fullkv_bf16"} <= set(reports)
    mixed, bf16, fp8 = (reports[n] for n in ("paper_zipage_fp8_vs_fullkv_bf16", "paper",
                                             "paper_fp8"))
    assert mixed["kv_cache_dtype"] == {"fullkv": "auto", "zipage": "fp8"}
    assert mixed["fullkv"] == bf16["fullkv"] and mixed["zipage"] == fp8["zipage"]
    assert mixed["speedup"] == pytest.approx(fp8["zipage"]["output_tokens_per_s"]
                                             / bf16["fullkv"]["output_tokens_per_s"])
    assert fp8["fullkv"]["pool_tokens"] > 1.9 * bf16["fullkv"]["pool_tokens"]
    text = capsys.readouterr().out
    assert (f"Zipage FP8 / Full KV bf16: {mixed['speedup']:.2f}x (bf16 / bf16: "
            f"{bf16['speedup']:.2f}x; FP8 / FP8: {fp8['speedup']:.2f}x)") in text
    assert not (tmp_path / "paper.json.partial.jsonl").exists()  # removed once written


def test_an_fp8_calibration_writes_fp8_configs(tmp_path):
    """`bench calibrate --kv-cache-dtype fp8` times the FP8 runner and keys its configs
    ENGINE/bBLOCK/fp8, so they can join a bf16 file (a probe here: one point, no fit)."""
    out = tmp_path / "probe.json"
    assert bench.main(["calibrate", "--cpu-smoke", "--kv-cache-dtype", "fp8", "--configs",
                       "fullkv/b16", "--only", "decode 8x128", "--out", str(out), "--warmup",
                       "0", "--sync-reps", "1", "--reps", "2"]) == 0
    data = json.loads(out.read_text())
    assert list(data["raw"]) == ["fullkv/b16/fp8"] and data["workload"]["kv_cache_dtype"] == "fp8"


def test_decode_speedup_what_if_is_faster_and_labelled(tmp_path, capsys):
    """`simulate --decode-speedup X`: the FP8 configs read their KV X times faster; the report
    and the printed table say it is a what-if, and the bf16 configs are untouched."""
    cal = tmp_path / "cal.json"
    cal.write_text(json.dumps(calibration()))
    args = ["simulate", "--cost", str(cal), "--kv-cache-dtype", "fp8", "--engines", "zipage",
            "--num-requests", "16", "--output-len", "200", "--budget", "64", "--block-size",
            "16", "--max-num-seqs", "16"]
    reports = {}
    for name, extra in (("base", []), ("faster", ["--decode-speedup", "2"])):
        out = tmp_path / f"{name}.json"
        assert bench.main(args + extra + ["--json", str(out)]) == 0
        reports[name] = json.loads(out.read_text())
    base, faster = (reports[n]["zipage"]["output_tokens_per_s"] for n in ("base", "faster"))
    assert faster > base
    assert "what_if" not in reports["base"]
    assert reports["faster"]["what_if"].startswith("WHAT-IF, not a prediction: fp8 decode KV "
                                                   "reads 2x faster")
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].startswith("== results written")  # the label closes the printed table
    assert lines[-2].startswith("== WHAT-IF") and lines[-2].endswith("(fullkv/b16/fp8, "
                                                                      "zipage/b16/fp8)")
    c = Calibration(str(cal))
    c.assume_faster_decode("fp8", 2.0)
    plain = Calibration(str(cal))
    assert c.cost("zipage", 16, "auto").device == plain.cost("zipage", 16, "auto").device
    with pytest.raises(SystemExit, match="give both"):
        bench.main(args + ["--decode-programs-per-sm", "4"])
