"""The decode kernel's waves in the step-cost model: the split count is the kernel's, the
waste of a short last wave is as stated, a fit finds planted wave parameters, calibration
files keep and refit them, and the simulator uses the simulated engine's graph sizes."""
import json

import pytest
import torch

from zipage.kernels.paged_decode import default_num_splits
from zipage.sampling_params import SamplingParams
from zipage.sim.cost_model import CostModel, LinearModel, fixed_cost_model
from zipage.sim.decode_waves import DecodeWaves, capture_sizes, num_splits
from zipage.sim.features import StepFeatures, step_features
from zipage.sim.synthetic import GridPoint, synthetic_step
from zipage.sim.waves_fit import fit_waves, refit_waves

SMS, HEADS = 132, 8
H200 = DecodeWaves(SMS, HEADS, programs_per_sm=5, saturating_programs=268)


def decode(rows: int, context: int = 16384) -> StepFeatures:
    return StepFeatures(decode_rows=rows, kv_read_tokens=rows * context)


@pytest.mark.parametrize("heads", [1, 2, 8])
def test_split_count_is_the_kernels(heads):
    """On the CPU the kernel counts 4 SMs; its long-context split count is ours at 4 SMs."""
    for batch in list(range(1, 70)) + [128, 512]:
        kernel = default_num_splits(batch, heads, 10**6, torch.device("cpu"))
        assert num_splits(batch, heads, 4) == kernel, batch


def test_waste_of_a_short_last_wave():
    # 48 rows (graph 48): 2 splits, 768 programs = a wave of 660 and a last one of 108
    assert H200.programs(decode(48)) == 768
    assert H200.waste(decode(48)) == pytest.approx((660 + 268) / 768)
    # 47 rows run in the same graph: 752 programs with work
    assert H200.waste(decode(47)) == pytest.approx((660 + 268) / 752)
    # 40 rows (graph 48, 2 splits): 640 programs, one wave, no waste
    assert H200.programs(decode(40)) == 640 and H200.waste(decode(40)) == 1.0
    # 64 rows: 1024 = 660 + 364, the last wave keeps the bandwidth busy
    assert H200.waste(decode(64)) == 1.0
    # 336 rows (no split): 2688 = 4 waves of 660 and 48
    assert H200.waste(decode(336, 2048)) == pytest.approx((4 * 660 + 268) / 2688)
    assert H200.waste(StepFeatures(prefill_rows=1, prefill_tokens=100)) == 1.0
    assert DecodeWaves(SMS, HEADS, 5, 0).waste(decode(48)) == 1.0  # M = 0: no waves


def test_graph_padding_decides_the_splits():
    # 17 decode rows replay the 32-row graph: 3 splits; eagerly (a prefill in the step, or
    # enforce_eager) the kernel sees 17 rows: 4 splits
    assert H200.launch_batch(decode(17)) == 32 and H200.programs(decode(17)) == 17 * 8 * 3
    mixed = StepFeatures(decode_rows=17, prefill_rows=1, prefill_tokens=64, kv_read_tokens=17)
    assert H200.launch_batch(mixed) == 17 and H200.programs(mixed) == 17 * 8 * 4
    eager = H200.for_engine(512, enforce_eager=True)
    assert eager.launch_batch(decode(17)) == 17
    # an engine capturing up to 40 rows replays its 40-row graph for 33..40
    assert H200.for_engine(40, False).launch_batch(decode(33)) == 40
    assert capture_sizes(40) == [1, 2, 4, 8, 16, 32, 40]


def test_wave_parameters_are_checked():
    with pytest.raises(ValueError, match=r"must lie in \[0, 660\]"):
        DecodeWaves(SMS, HEADS, 5, 700)
    with pytest.raises(ValueError, match="unknown keys"):
        DecodeWaves.from_dict(dict(H200.to_dict(), max_num_seqs=64))
    with pytest.raises(ValueError, match="missing"):
        DecodeWaves.from_dict({"sms": 132})
    assert DecodeWaves.from_dict(H200.to_dict()) == H200


def wave_cost(waves: DecodeWaves | None) -> CostModel:
    base = fixed_cost_model()
    device = LinearModel({"rows@1": 5e-3, "rows@512": 14e-3, "kv_read_per_mtoken": 0.034},
                         (1, 512), waves)
    return CostModel(device, base.host, {})


def test_a_cost_model_with_waves_round_trips_and_old_files_have_none():
    cost = wave_cost(H200)
    again = CostModel.from_dict(json.loads(json.dumps(cost.to_dict())))
    assert again.device.waves == H200
    f = decode(48)
    assert again.device_s(f) == pytest.approx(cost.device_s(f))
    no_waves = wave_cost(None)
    assert "decode_waves" not in no_waves.to_dict()
    kv_s = 0.034 * f.kv_read_tokens / 1e6
    assert cost.device_s(f) - no_waves.device_s(f) == pytest.approx(kv_s * (928 / 768 - 1))
    assert no_waves.for_engine(64, False) is no_waves
    assert cost.for_engine(40, False).device.waves.max_num_seqs == 40


PARAMS = SamplingParams(temperature=0.6)


def planted_grid(waves: DecodeWaves) -> list[dict]:
    """The default Full-KV grid's decode points timed by a model with these waves."""
    truth = wave_cost(waves)
    grid = []
    for rows in (1, 8, 32, 64, 128, 256, 384, 512):
        for ctx in (128, 1024, 4096, 16384):
            if rows * ctx > 800_000:
                continue
            f = step_features(synthetic_step(GridPoint(rows, ctx), 256, 4000, None, 0, PARAMS))
            grid.append({"name": f"decode {rows}x{ctx}", "features": f.as_dict(),
                         "device_s": [truth.device_s(f)] * 3})
    return grid


def test_the_fit_finds_planted_waves_and_leaves_a_grid_without_them():
    planted = DecodeWaves(SMS, HEADS, 5, 250)
    waves, fit = fit_waves([planted_grid(planted)], SMS, HEADS, per_sm=(3, 4, 5, 6))
    assert (waves.programs_per_sm, waves.saturating_programs) == (5, 250)
    assert fit["rms_rel_error"] < 1e-6 < fit["rms_rel_error_without_waves"]
    assert set(fit["profile"]) == {3, 4, 5, 6}
    flat, fit = fit_waves([planted_grid(DecodeWaves(SMS, HEADS, 5, 0))], SMS, HEADS,
                          per_sm=(4, 5))
    assert flat.waste(decode(48)) == 1.0 and fit["rms_rel_error"] < 1e-6


def calibration_file(waves: DecodeWaves) -> dict:
    grid = planted_grid(waves)
    model = wave_cost(None).to_dict()
    models = {"fullkv/b256": model, "fullkv/b256/fp8": model,
              "zipage/b256": dict(model, meta={"fitted_to": "traces"})}
    return {"format": "zipage-step-cost/1", "environment": {"sm_count": SMS},
            "model_shape": {"num_kv_heads": HEADS}, "models": models,
            "raw": {k: {"grid": grid} for k in models}}


def test_refit_fits_each_kv_dtype_and_leaves_trace_refits_alone():
    data, lines = calibration_file(DecodeWaves(SMS, HEADS, 5, 250)), []
    refit_waves(data, log=lines.append)
    for key in ("fullkv/b256", "fullkv/b256/fp8"):
        model = CostModel.from_dict(data["models"][key])
        assert model.device.waves.saturating_programs == 250, key
        assert model.meta["fit"]["device"]["rms_rel_error"] < 1e-6
        assert model.meta["fit"]["device_without_waves"] is None  # the model had no fit record
    assert "decode_waves" not in data["models"]["zipage/b256"]
    assert sum("decode waves of the" in line for line in lines) == 2  # auto and fp8 apart
    with pytest.raises(ValueError, match="no SM count"):
        refit_waves(dict(data, environment={}))


def test_calibrate_decode_waves_on_the_cpu(tmp_path):
    from scripts import bench
    base, out = tmp_path / "cal.json", tmp_path / "waves.json"
    data = calibration_file(DecodeWaves(SMS, HEADS, 5, 250))
    data.update(gpu="test GPU", model="qwen3-8b")
    base.write_text(json.dumps(data))
    assert bench.main(["calibrate", "--decode-waves", "--base", str(base), "--out",
                       str(out)]) == 0
    refit = json.loads(out.read_text())
    assert refit["models"]["fullkv/b256"]["decode_waves"]["saturating_programs"] == 250


def test_the_simulator_pays_the_waste_of_its_engine():
    """48 requests of one long length: every decode step has 48 rows (768 programs, a short
    last wave): the simulated device time is the no-wave one plus the waste on the KV term."""
    from zipage.sim.simulate import make_requests, simulate
    opts = dict(load_format="dummy", block_size=256, max_num_seqs=48, kv_cache_tokens=48 * 768,
                max_model_len=1024, async_scheduling=True)
    requests = make_requests([600] * 48, 128)
    runs = {w: simulate("qwen3-8b", opts, requests, wave_cost(w))
            for w in (None, DecodeWaves(SMS, HEADS, 5, 268))}
    without, with_waves = runs[None], runs[DecodeWaves(SMS, HEADS, 5, 268)]
    assert with_waves["steps"] == without["steps"]
    extra = with_waves["device_busy_s"] - without["device_busy_s"]
    kv_tokens = without["mean_decode_context"] * 48 * 599  # every decode step: 48 rows
    assert extra == pytest.approx(0.034 * kv_tokens / 1e6 * (928 / 768 - 1), rel=0.02)
