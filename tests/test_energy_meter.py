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


def test_a_counter_that_stops_answering_mid_loop_gives_no_energy_rather_than_an_error():
    counter = FakeCounter()
    readings = iter([1000, 2000, 3000, None])  # warm loop, then the measured one's end
    counter.millijoules = lambda: next(readings)
    assert energy_per_call(lambda: None, counter, 0.001, lambda: None) is None


def test_a_runs_energy_is_the_counter_difference_over_its_tokens_and_seconds():
    from scripts.throughput.energy import energy_since
    counter = FakeCounter()
    start = counter.millijoules()
    counter.mj += 48_000  # 48 J over the run
    out = energy_since(counter, start, 2.0, 1000)
    assert out == dict(joules=48.0, watts=24.0, mj_per_output_token=48.0)


def test_a_run_without_a_counter_or_a_start_reading_reports_no_energy():
    from scripts.throughput.energy import energy_since
    assert energy_since(None, 1000, 2.0, 10) is None
    assert energy_since(FakeCounter(), None, 2.0, 10) is None
    assert energy_since(EnergyCounter(library="libnvidia-ml-that-is-not-here.so"), 0, 2.0,
                        10) is None


def test_the_long_benchmarks_table_shows_a_dash_without_energy():
    from scripts.throughput.long import mj_per_token
    assert mj_per_token({"energy": None}) == "-"
    assert mj_per_token({"energy": {"mj_per_output_token": 47.94}}) == "47.9"


def test_a_library_without_nvml_gives_no_counter_rather_than_an_error():
    assert not EnergyCounter(library="libc.so.6").available
