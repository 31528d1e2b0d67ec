"""`bench simulate --validate` on small fixture files: a `bench throughput` result (the W1
format) converts to the report format, each run's prediction is the simulation's exact
virtual time, and a run whose trace the cost model was fitted to is marked in-sample."""
import json

import pytest

from scripts import bench
from zipage.sim import report as rp
from zipage.sim.calibration_file import CALIBRATION_FORMAT
from zipage.sim.cost_model import CostModel, LinearModel
from zipage.sim.measured import load_measured

D, S, L, P, START = 0.010, 0.001, 0.003, 0.002, 0.0004
ZIPAGE_OPTIONS = dict(load_format="dummy", seed=0, block_size=16, max_num_seqs=4,
                      max_model_len=64, async_scheduling=True, kv_cache_tokens=256, budget=32)


def throughput_result(tok_s: float) -> dict:
    return {"environment": {"gpu": "test"},
            "workload": {"model": "qwen3-1.7b", "num_requests": 4, "prompt_len": 12,
                         "output_len": 20, "temperature": 0.0, "seed": 0, "budget": None},
            "engine_options": {"block_size": 16, "budget": None, "max_num_seqs": 4,
                               "max_num_batched_tokens": 256, "max_model_len": 64,
                               "enable_prefix_caching": True, "enforce_eager": False},
            "ours": {"wall_time_s": 80 / tok_s, "num_output_tokens": 80,
                     "output_tokens_per_s": tok_s,
                     "stats": {"num_steps": 20, "mean_running": 4.0, "num_preemptions": 0,
                               "num_compressions": 0, "num_kv_blocks": 16}}}


def long_report(tok_s: float) -> dict:
    entry = rp.engine_entry(output_tokens=160, wall_time_s=160 / tok_s, steps=40,
                            mean_running=4.0, preemptions=0, compressions=4, num_kv_blocks=16,
                            block_size=16, options=ZIPAGE_OPTIONS)
    return rp.build_report("measured", model="qwen3-1.7b", gpu="test", output_len=40,
                           num_requests=4, prompt_len=12, budget=32, block_size=16,
                           async_scheduling=True, engines={"zipage": entry}, temperature=0.6)


def constant(meta: dict) -> dict:
    host = {p: LinearModel({"base": s}) for p, s in
            (("schedule", S), ("launch", L), ("post", P), ("start", START))}
    return CostModel(LinearModel({"rows@1": D}, (1,)), host, meta).to_dict()


@pytest.fixture
def files(tmp_path):
    cal = {"format": CALIBRATION_FORMAT, "model": "qwen3-1.7b", "gpu": "test",
           "models": {"fullkv/b16": constant({}),
                      "zipage/b16": constant({"fitted_options": [ZIPAGE_OPTIONS]})}}
    paths = {name: tmp_path / f"{name}.json" for name in ("cal", "w1", "w2")}
    paths["cal"].write_text(json.dumps(cal))
    paths["w1"].write_text(json.dumps(throughput_result(1000.0)))
    paths["w2"].write_text(json.dumps(long_report(2000.0)))
    return tmp_path, paths


def test_a_throughput_result_converts(files):
    _, paths = files
    r = load_measured(str(paths["w1"]))
    assert r["format"] == rp.REPORT_FORMAT and r["zipage"] is None
    assert r["fullkv"]["options"]["kv_cache_tokens"] == 16 * 16
    assert r["fullkv"]["output_tokens_per_s"] == 1000.0 and r["temperature"] == 0.0
    assert (r["fullkv"]["steps"], r["async_scheduling"]) == (20, False)


def test_a_zipage_throughput_result_is_refused(files, tmp_path):
    data = throughput_result(1000.0)
    data["workload"]["budget"] = 32
    (tmp_path / "z.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="cannot be converted"):
        load_measured(str(tmp_path / "z.json"))


def test_validate_predicts_and_marks_in_sample(files):
    d, paths = files
    md, out = d / "validation.md", d / "validation.json"
    rc = bench.main(["simulate", "--validate", str(paths["w1"]), str(paths["w2"]), "--cost",
                     str(paths["cal"]), "--markdown", str(md), "--json", str(out)])
    runs = json.loads(out.read_text())["validation"]
    (w1,), (w2,) = runs[0]["rows"], runs[1]["rows"]
    # W1 is synchronous: every step pays schedule + start + device + post
    assert (w1["steps_predicted"], w2["compressions_predicted"]) == (20, 4)
    assert w1["predicted_tok_s"] == pytest.approx(80 / (20 * (S + START + D + P)), rel=1e-9)
    # W2 is asynchronous: the launch (3 ms) and start hide behind the device after step 1
    n = w2["steps_predicted"]
    assert w2["predicted_tok_s"] == pytest.approx(160 / (S + START + n * D + P), rel=1e-9)
    assert (w1["sample"], w2["sample"]) == ("held-out", "in-sample")
    assert (w1["steps_measured"], w2["steps_measured"]) == (20, n) == (20, 40)
    assert w1["error_pct"] == pytest.approx(100 * (w1["predicted_tok_s"] / 1000.0 - 1))
    assert rc == (0 if all(r["within_tolerance"] for r in (w1, w2)) else 1)
    table = md.read_text()
    assert "| fullkv | held-out | 1,000 |" in table and "| zipage | in-sample | 2,000 |" in table
