"""The SimRunner's two clocks: synchronous scheduling pays host and device time in turn,
asynchronous scheduling hides the host behind the device (exact virtual times)."""
import pytest

from zipage.sim.cost_model import CostModel, LinearModel
from zipage.sim.simulate import make_requests, simulate

MODEL = "qwen3-1.7b"  # a preset shape: no weights are built


def constant_cost(device_s: float, schedule_s: float, launch_s: float, post_s: float) -> CostModel:
    host = {p: LinearModel({"base": s}) for p, s in
            (("schedule", schedule_s), ("launch", launch_s), ("post", post_s))}
    return CostModel(LinearModel({"rows@1": device_s}, (1,)), host)


def run(async_scheduling: bool, cost: CostModel, **extra) -> dict:
    options = dict(load_format="dummy", block_size=16, kv_cache_tokens=4096, max_num_seqs=4,
                   async_scheduling=async_scheduling, **extra)
    return simulate(MODEL, options, make_requests([40, 25, 33, 10], 12), cost)


def test_sync_pays_host_and_device_in_turn():
    r = run(False, constant_cost(0.010, 0.001, 0.0005, 0.002))
    assert r["wall_time_s"] == pytest.approx(r["steps"] * (0.001 + 0.010 + 0.002))
    assert r["device_busy_s"] == pytest.approx(r["steps"] * 0.010)


def test_async_hides_the_host_behind_the_device():
    r = run(True, constant_cost(0.010, 0.001, 0.0005, 0.002))
    # first schedule, then every step back to back on the device, then the last post
    assert r["wall_time_s"] == pytest.approx(0.001 + r["steps"] * 0.010 + 0.002)


def test_async_is_host_bound_when_the_host_is_slower():
    r = run(True, constant_cost(0.001, 0.004, 0.001, 0.004))
    # the device waits for every launch: each step costs schedule + launch + post
    assert r["wall_time_s"] == pytest.approx(r["steps"] * 0.009, rel=0.02)
    assert r["device_busy_s"] == pytest.approx(r["steps"] * 0.001)


def test_device_never_ends_before_the_host_has_queued_the_step():
    r = run(False, constant_cost(0.001, 0.0, 0.005, 0.0))  # launching outlasts the work
    assert r["wall_time_s"] == pytest.approx(r["steps"] * 0.005)


def test_same_counts_in_both_modes_and_rows_cost_more():
    cost = constant_cost(0.010, 0.001, 0.0005, 0.002)
    sync, asyn = run(False, cost), run(True, cost)
    assert (sync["steps"], sync["output_tokens"]) == (asyn["steps"], asyn["output_tokens"]) \
        == (sync["steps"], 108)
    per_row = CostModel(LinearModel({"rows@1": 0.0, "rows@4": 0.004}, (1, 4)), cost.host)
    assert run(False, per_row)["device_busy_s"] < run(False, cost)["device_busy_s"]
