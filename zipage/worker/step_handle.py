"""A launched step: device tensors it will produce, read on the host only when collected."""
import time

import torch

from zipage.engine.messages import StepResult
from zipage.engine.sequence import TeacherRecord


class DeviceTimer:
    """Times work queued on a device without waiting for it: CUDA events, read when the step
    is collected. On the CPU the work runs synchronously and a clock is enough."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        if self.cuda:
            self.start, self.end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self.start.record()
        else:
            self.t0, self.elapsed = time.perf_counter(), 0.0

    def stop(self) -> "DeviceTimer":
        if self.cuda:
            self.end.record()
        else:
            self.elapsed = time.perf_counter() - self.t0
        return self

    def seconds(self) -> float:
        """Waits for the timed work (already done when the step's tokens are)."""
        if not self.cuda:
            return self.elapsed
        self.end.synchronize()
        return self.start.elapsed_time(self.end) / 1e3


class StepHandle:
    """Sampling rows of a step and their tokens (on the device: the next step's inputs),
    with copies to the host queued right behind the step and an event marking them, so
    collecting this step never waits for steps launched after it."""

    def __init__(self, seq_ids: list[int], tokens: torch.Tensor | None,
                 teacher: tuple | None = None, compression: DeviceTimer | None = None):
        self.seq_ids = seq_ids
        self.tokens = tokens  # (len(seq_ids),) int64
        self.teacher = teacher  # (use, logprob, argmax, forced) when teacher forcing
        self.compression = compression
        self.step_timer: DeviceTimer | None = None  # the whole step (ModelRunner.time_steps)
        self.host_tokens, self.ready = tokens, None
        if tokens is not None and tokens.is_cuda:
            self.host_tokens = _to_host(tokens)
            if teacher is not None:
                self.teacher = tuple(_to_host(x) for x in teacher)
            self.ready = torch.cuda.Event()
            self.ready.record()

    def result(self) -> StepResult:
        """Wait for this step only and read what it produced."""
        if self.ready is not None:
            self.ready.synchronize()
        out = StepResult(compression_time_s=self.compression.seconds() if self.compression else 0.0)
        if self.step_timer is not None:
            out.device_time_s = self.step_timer.seconds()
        if self.tokens is None:
            return out
        out.sampled = dict(zip(self.seq_ids, self.host_tokens.tolist()))
        if self.teacher is not None:
            use, logprob, argmax, forced = (x.tolist() for x in self.teacher)
            out.teacher = {sid: TeacherRecord(lp, top, f)
                           for sid, u, lp, top, f in zip(self.seq_ids, use, logprob, argmax, forced) if u}
        return out


def _to_host(x: torch.Tensor) -> torch.Tensor:
    return torch.empty(x.shape, dtype=x.dtype, pin_memory=True).copy_(x, non_blocking=True)
