"""A `bench throughput` JSON converted for `simulate --validate` keeps its scheduling mode:
an asynchronous run simulated as synchronous once matched a different run by coincidence."""
import json

import pytest

from zipage.sim.measured import from_throughput

RUN = "results/bench/w1_throughput_s20261202d_async.json"


@pytest.mark.parametrize("asynchronous", [True, False])
def test_the_scheduling_mode_of_a_throughput_run_is_kept(asynchronous):
    with open(RUN) as f:
        data = json.load(f)
    data["workload"]["async_scheduling"] = asynchronous
    data["engine_options"]["async_scheduling"] = asynchronous
    report = from_throughput(data, RUN)
    assert report["async_scheduling"] is asynchronous
    assert report["fullkv"]["options"]["async_scheduling"] is asynchronous
