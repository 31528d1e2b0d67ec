"""scripts/throughput/energy.py: joules per kernel call from a counter (NVML's on a GPU)."""
from scripts.throughput.energy import EnergyCounter, energy_per_call


class FakeCounter:
    """A counter that gains 5 mJ per call of the function it is given."""
    available = True

    def __init__(self):
        self.mj = 1000

    def millijoules(self):
        return self.mj

    def sm_clock_mhz(self):
        return 1575


def test_energy_per_call_divides_the_counter_by_the_calls_of_the_measured_loop():
    counter = FakeCounter()

    def call():
        counter.mj += 5
    syncs = []
    out = energy_per_call(call, counter, 0.01, lambda: syncs.append(1))
    assert out["mj_per_call"] == 5.0 and out["calls"] % 10 == 0 and out["calls"] > 0
    assert out["sm_mhz"] == 1575 and out["watts"] > 0
    assert len(syncs) == 4  # before and after the warm-up loop and the measured one


def test_no_counter_no_energy():
    assert energy_per_call(lambda: None, None, 1.0, lambda: None) is None
    missing = EnergyCounter(library="libnvidia-ml-that-is-not-here.so")
    assert not missing.available
    assert energy_per_call(lambda: None, missing, 1.0, lambda: None) is None
