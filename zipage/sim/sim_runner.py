"""A runner without a model: it implements the runner protocol of
zipage/engine/llm_engine.py, so the real LLMEngine, Scheduler and BlockManager run unchanged,
and it advances a virtual clock by a step-cost model instead of computing.

Two clocks model the host and the device (one CUDA stream):

* ``launch(step)``: the host spends ``schedule`` (the scheduler, before the launch), then
  ``launch`` queueing the step. The device can begin it ``start`` seconds into the launch
  (the host builds the inputs and copies them before the first kernel; start <= launch),
  and not before it is free; it ends ``device_s`` after it began (never before the host
  has queued it all).
* ``collect(handle)``: the host waits for that step's end, then spends ``post``.

Synchronous scheduling (launch, collect, launch, ...) then costs schedule + start + device +
post per step (the device is idle at every launch); asynchronous scheduling (the engine
launches step N+1 before collecting step N) hides host work, start included, behind the
previous step's device time, leaving the device idle only when schedule + start (+ post of
the step collected in between) exceeds it. Nothing here asks which mode runs: the same
two clocks give both. Sampled tokens are deterministic pseudo-random ids
(distinct per request and position, so prefix-cache hits happen only on shared prompts, as
in a real run); requests end through their own ``max_tokens`` (the workload's lengths).
"""
from dataclasses import dataclass

from zipage.engine.messages import SchedulerOutput, StepResult
from zipage.sim.cost_model import CostModel
from zipage.sim.features import StepFeatures, step_features


@dataclass
class SimHandle:
    step: SchedulerOutput
    features: StepFeatures
    start: float  # device clock, seconds
    end: float


@dataclass
class SimTotals:
    """Sums over the launched steps (virtual seconds)."""
    steps: int = 0
    device_busy_s: float = 0.0
    host_s: float = 0.0
    compression_s: float = 0.0  # device time attributed to compressions (their terms)
    kv_read_tokens: int = 0  # decode contexts + prefill contexts: KV attended
    decode_kv_tokens: int = 0  # decode contexts only
    decode_rows: int = 0


class SimRunner:
    def __init__(self, num_kv_blocks: int, num_query_slots: int, cost: CostModel,
                 vocab_size: int):
        self.num_kv_blocks, self.num_query_slots = num_kv_blocks, num_query_slots
        self.cost, self.vocab_size = cost, vocab_size
        self.host_clock = 0.0
        self.device_free_at = 0.0
        self.totals = SimTotals()

    @property
    def now(self) -> float:
        """Virtual seconds since the start: the host's clock (it finishes last)."""
        return self.host_clock

    def launch(self, step: SchedulerOutput, previous: SimHandle | None) -> SimHandle:
        f = step_features(step)
        schedule, launch = self.cost.host_s("schedule", f), self.cost.host_s("launch", f)
        device = self.cost.device_s(f)
        self.host_clock += schedule
        start = max(self.host_clock + self.cost.start_s(f), self.device_free_at)
        self.host_clock += launch
        end = max(start + device, self.host_clock)
        self.device_free_at = end
        t = self.totals
        t.steps += 1
        t.device_busy_s += end - start
        t.host_s += schedule + launch
        t.compression_s += self.compression_s(f)
        t.kv_read_tokens += f.kv_read_tokens + f.prefill_context_tokens
        t.decode_kv_tokens += f.kv_read_tokens
        t.decode_rows += f.decode_rows
        return SimHandle(step, f, start, end)

    def collect(self, handle: SimHandle) -> StepResult:
        post = self.cost.host_s("post", handle.features)
        self.host_clock = max(self.host_clock, handle.end) + post
        self.totals.host_s += post
        sampled = {sid: self.token(row.seed or 0, row.sample_position)
                   for sid, row in handle.step.requests.items() if row.sampling is not None}
        return StepResult(sampled=sampled, compression_time_s=self.compression_s(handle.features))

    def token(self, seed: int, position: int) -> int:
        return (seed * 1_000_003 + position * 7_919 + 12_345) % self.vocab_size

    def compression_s(self, f: StepFeatures) -> float:
        """The compression terms of the device model at this step."""
        if not f.compressions:
            return 0.0
        c = self.cost.device.coefficients
        return (c.get("compression_step", 0.0) + c.get("per_compression", 0.0) * f.compressions
                + c.get("compressed_per_mtoken", 0.0) * f.compressed_tokens / 1e6)
