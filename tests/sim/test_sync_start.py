"""The idle start of a step (the host builds and copies its inputs before the device can
begin): paid in full by every synchronous step, hidden behind the previous step by
asynchronous scheduling (exact virtual times), capped by the launch, and fitted from the
first back-to-back repetition of each grid point."""
import pytest

from zipage.sim.calibration import fit_start, start_seconds
from zipage.sim.cost_model import CostModel, LinearModel
from zipage.sim.features import StepFeatures
from zipage.sim.simulate import make_requests, simulate

MODEL = "qwen3-1.7b"  # a preset shape: no weights are built
D, S, L, P = 0.010, 0.001, 0.0005, 0.002  # device, schedule, launch, post seconds


def cost(start_s: float | None) -> CostModel:
    host = {"schedule": S, "launch": L, "post": P}
    if start_s is not None:
        host["start"] = start_s
    return CostModel(LinearModel({"rows@1": D}, (1,)),
                     {p: LinearModel({"base": s}) for p, s in host.items()})


def run(async_scheduling: bool, c: CostModel) -> dict:
    options = dict(load_format="dummy", block_size=16, kv_cache_tokens=4096, max_num_seqs=4,
                   async_scheduling=async_scheduling)
    return simulate(MODEL, options, make_requests([40, 25, 33, 10], 12), c)


def test_sync_pays_the_start_every_step():
    r = run(False, cost(0.0003))
    assert r["wall_time_s"] == pytest.approx(r["steps"] * (S + 0.0003 + D + P), rel=1e-12)
    assert r["device_busy_s"] == pytest.approx(r["steps"] * D, rel=1e-12)  # idle, not busy


def test_async_hides_it_after_the_first_step():
    r = run(True, cost(0.0003))
    # only the first step finds the device idle; the others start behind their predecessor
    assert r["wall_time_s"] == pytest.approx(S + 0.0003 + r["steps"] * D + P, rel=1e-12)


def test_the_start_never_exceeds_the_launch():
    r = run(False, cost(0.004))  # more than the 0.5 ms launch: capped at the launch
    assert r["wall_time_s"] == pytest.approx(r["steps"] * (S + L + D + P), rel=1e-12)


def test_a_calibration_without_start_keeps_the_old_times():
    old, zero = run(False, cost(None)), run(False, cost(0.0))
    assert old["wall_time_s"] == zero["wall_time_s"] == pytest.approx(
        old["steps"] * (S + D + P), rel=1e-12)


def test_unknown_or_missing_host_phases_are_refused():
    d = cost(0.0003).to_dict()
    assert CostModel.from_dict(d).host_s("start", StepFeatures()) == 0.0003
    d["host"]["begin"] = {"base": 1.0}
    with pytest.raises(ValueError, match=r"unknown host phases \['begin'\]"):
        CostModel.from_dict(d)
    d = cost(None).to_dict()
    del d["host"]["post"]
    with pytest.raises(ValueError, match=r"host phases \['post'\] missing"):
        CostModel.from_dict(d)


def test_start_of_a_point_is_its_first_repetition_over_the_busy_time():
    assert start_seconds({"device_s": [0.0120, 0.0100, 0.0101]}) == pytest.approx(0.00195)
    assert start_seconds({"device_s": [0.19, 0.18, 0.198]}) is None  # scatter > difference
    assert start_seconds({"device_s": [0.012, 0.010]}) is None  # no busy repetitions to compare


def grid_point(rows: int, start: float, busy: float = 0.01) -> dict:
    return {"features": StepFeatures(decode_rows=rows, kv_read_tokens=64 * rows).as_dict(),
            "device_s": [busy + start, busy, busy]}


def test_fit_start_recovers_a_linear_start():
    truth = lambda n: 3e-4 + 4e-6 * n  # noqa: E731
    grid = [grid_point(n, truth(n)) for n in (1, 8, 64, 256)] + [grid_point(4, -1e-3)]
    model, err = fit_start(grid)
    assert err["points"] == 4  # the point whose first repetition was faster is left out
    for n in (2, 100, 512):
        assert model(StepFeatures(decode_rows=n)) == pytest.approx(truth(n), rel=1e-9)
    assert fit_start([grid_point(4, -1e-3)]) is None
