"""GPU energy per kernel call and per run, from NVML's energy counter (ctypes: no package).

On a power-capped GPU (the H200 here holds Zipage 512 at its 700 W cap) a step costs about
its energy, so a kernel that is faster alone but spends the same joules barely shortens the
engine's step (docs/fp8.md, "Throughput"). `bench fp8-kernels --energy S` loops each decode
variant for S seconds and reports millijoules per call, mean watts and the SM clock next to
its time; `bench long` reports each engine run's joules and mJ per output token
(`energy_since`). The counter is the board's (GPU and memory), in mJ since the driver loaded; NVML
device 0 is read, so run on a machine whose first GPU is the one timed.
"""
import ctypes
import time

NVML_CLOCK_SM = 1


class EnergyCounter:
    """NVML's total-energy counter of one GPU; `available` is False where NVML or the counter
    is missing (a CPU machine, GPUs before Volta)."""

    def __init__(self, index: int = 0, library: str = "libnvidia-ml.so.1"):
        self.lib = self.handle = None
        try:  # a missing library or symbol means no counter, never a failed benchmark
            lib = ctypes.CDLL(library)
            handle = ctypes.c_void_p()
            if lib.nvmlInit_v2() != 0 or lib.nvmlDeviceGetHandleByIndex_v2(
                    index, ctypes.byref(handle)) != 0:
                return
        except (OSError, AttributeError):
            return
        self.lib, self.handle = lib, handle
        if self.millijoules() is None:
            self.lib = self.handle = None

    @property
    def available(self) -> bool:
        return self.handle is not None

    def millijoules(self) -> int | None:
        value = ctypes.c_ulonglong()
        try:
            rc = self.lib.nvmlDeviceGetTotalEnergyConsumption(self.handle, ctypes.byref(value))
        except AttributeError:  # a driver without the counter
            return None
        return value.value if rc == 0 else None

    def sm_clock_mhz(self) -> int | None:
        value = ctypes.c_uint()
        rc = self.lib.nvmlDeviceGetClockInfo(self.handle, NVML_CLOCK_SM, ctypes.byref(value))
        return value.value if rc == 0 else None


def _millijoules_since(counter, start_mj: int | None) -> int | None:
    """The counter's gain since start_mj; None where either reading failed (the counter
    stopped answering)."""
    end_mj = counter.millijoules()
    return None if start_mj is None or end_mj is None else end_mj - start_mj


def energy_per_call(fn, counter, seconds: float, sync) -> dict | None:
    """fn called back to back for about `seconds` (after as many calls again to reach a
    steady clock): {"mj_per_call", "watts", "sm_mhz" (at the end), "calls"}; None where the
    counter is unavailable or stops answering. sync() waits for the device
    (torch.cuda.synchronize)."""
    if counter is None or not counter.available or seconds <= 0:
        return None
    for phase in ("warm", "measure"):
        sync()
        start_mj, start_s, calls = counter.millijoules(), time.perf_counter(), 0
        while time.perf_counter() - start_s < seconds:
            for _ in range(10):  # queue a few calls between clock reads
                fn()
            calls += 10
        sync()
        mj, elapsed = _millijoules_since(counter, start_mj), time.perf_counter() - start_s
        if mj is None:
            return None
    return dict(mj_per_call=mj / calls, watts=mj / 1e3 / elapsed, sm_mhz=counter.sm_clock_mhz(),
                calls=calls)


def energy_since(counter, start_mj: int | None, seconds: float, output_tokens: int) -> dict | None:
    """{"joules", "watts", "mj_per_output_token"} of a run that began when the counter read
    start_mj and lasted `seconds` (the caller has waited for the device); None without a
    counter or a start reading."""
    if counter is None or not counter.available:
        return None
    mj = _millijoules_since(counter, start_mj)
    if mj is None:
        return None
    return dict(joules=mj / 1e3, watts=mj / 1e3 / seconds if seconds > 0 else None,
                mj_per_output_token=mj / output_tokens if output_tokens else None)
