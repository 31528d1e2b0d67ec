"""The engine: requests in, one step at a time, finished samples out.

``LLMEngine`` owns the scheduler and the block manager and drives a *runner*, whatever
executes a step: ``zipage.worker.ModelRunner`` (a model on one device); later, worker
processes for tensor parallelism, or a simulation that advances a clock by a step-cost
model. The engine talks to a runner only through this protocol:

* ``runner.num_kv_blocks``, ``runner.num_query_slots``: the pool the runner allocated.
* ``runner.launch(step: SchedulerOutput, previous) -> handle``: queue the step (compressions
  first, then one forward and sampling) and return without waiting for it. ``previous`` is
  the handle of the step launched just before and not collected yet (asynchronous
  scheduling), else None: rows with ``input_from_previous`` take its sampled token.
* ``runner.collect(handle) -> StepResult``: wait for that step; its sampled tokens,
  teacher-forcing records and compression time. Each handle is collected once, in launch
  order.

``engine.on_step``, when set, is called once per collected step with the step, its result
and its host timings (``StepTiming``): measured runs record traces with it (zipage/sim).

Messages (``zipage/engine/messages.py``) are never written after they are built, so the
runner may read them whenever it likes. With ``async_scheduling`` the engine schedules and
launches step N+1 before it collects step N (outputs are identical, docs/design.md).
"""
import time
from dataclasses import dataclass
from numbers import Integral
from typing import Any, NamedTuple, Protocol

from zipage.config import EngineConfig
from zipage.engine.block_manager import BlockManager
from zipage.engine.messages import SchedulerOutput, StepResult
from zipage.engine.outputs import Detokenizer
from zipage.engine.scheduler import Scheduler, SchedulerConfig
from zipage.engine.sequence import Sequence, Status
from zipage.outputs import CompletionOutput
from zipage.sampling_params import SamplingParams


class Runner(Protocol):
    num_kv_blocks: int
    num_query_slots: int

    def launch(self, step: SchedulerOutput, previous: Any | None) -> Any: ...

    def collect(self, handle: Any) -> StepResult: ...


class InvalidRequest(ValueError):
    """A request that cannot run (the others still do); the message says why."""


class FinishedSample(NamedTuple):
    request_id: int
    output: CompletionOutput


class StepTiming(NamedTuple):
    """Host seconds of one step (perf_counter), passed to ``LLMEngine.on_step``."""
    schedule_s: float  # scheduler.schedule() of this step
    launch_s: float  # runner.launch
    wait_s: float  # runner.collect: waiting for the device
    post_s: float  # applying its results (scheduler, detokenizer)
    end: float  # perf_counter when the results were applied


@dataclass
class EngineStats:
    """Since the last ``reset_stats``."""
    num_steps: int = 0
    sum_running: int = 0
    peak_running: int = 0
    schedule_time_s: float = 0.0  # host time outside the runner (scheduling, results)
    execute_time_s: float = 0.0  # runner time: launching and waiting for steps
    compression_time_s: float = 0.0


@dataclass
class _Launched:
    step: SchedulerOutput
    handle: Any
    schedule_s: float = 0.0
    launch_s: float = 0.0


class LLMEngine:
    def __init__(self, config: EngineConfig, runner: Runner, tokenizer, eos_token_ids: set[int],
                 max_model_len: int, vocab_size: int):
        self.config, self.runner = config, runner
        self.eos_token_ids, self.max_model_len, self.vocab_size = eos_token_ids, max_model_len, vocab_size
        self.detokenizer = Detokenizer(tokenizer)
        # A compressing request scores with its own queries of its last W computed tokens: a
        # cache hit leaves W + 1 to compute (docs/method.md, prefix caching).
        recompute = config.observation_window + 1 if config.budget is not None else 1
        self.block_manager = BlockManager(runner.num_kv_blocks, config.block_size,
                                          config.enable_prefix_caching, recompute)
        self.scheduler = Scheduler(SchedulerConfig(
            block_size=config.block_size, max_num_seqs=config.max_num_seqs,
            max_num_batched_tokens=config.max_num_batched_tokens, max_model_len=max_model_len,
            num_kept_blocks=config.num_kept_blocks, num_query_slots=runner.num_query_slots,
            compress_prompt_only=config.compression.compress_prompt_only),
            self.block_manager)
        self.stats = EngineStats()
        self._in_flight: _Launched | None = None
        self.on_step = None  # callable(step, result, StepTiming) per collected step, or None

    # -- requests -------------------------------------------------------------------------
    def add_request(self, request_id: int, prompt_token_ids: list[int], params: SamplingParams,
                    arrival_time: float | None = None) -> None:
        """Queue ``params.n`` samples of a prompt; raises InvalidRequest (nothing queued)."""
        error = self.check_prompt(prompt_token_ids)
        if error:
            raise InvalidRequest(error)
        ids = [int(t) for t in prompt_token_ids]  # numpy integers too
        arrival = time.perf_counter() if arrival_time is None else arrival_time
        for k in range(params.n):
            seq = Sequence(ids, params, self.config.block_size, request_id, k,
                           self.seed(params, request_id, k))
            seq.arrival_time = arrival
            self.scheduler.add(seq)

    def check_prompt(self, ids: list[int]) -> str | None:
        if not ids:
            return "empty prompt"
        V = self.vocab_size
        if not (all(type(t) is int for t in ids) and min(ids) >= 0 and max(ids) < V):  # fast path
            bad = next((i for i, t in enumerate(ids) if not isinstance(t, Integral)
                        or isinstance(t, bool) or not 0 <= t < V), None)
            if bad is not None:
                return (f"prompt token {ids[bad]!r} at position {bad} is not a token id of "
                        f"this model (integers in [0, {V}))")
        if len(ids) >= self.max_model_len:
            return (f"prompt has {len(ids)} tokens but max_model_len is {self.max_model_len} "
                    f"(no room to generate)")
        need = -(-(len(ids) + 1) // self.config.block_size)
        if need > self.block_manager.num_blocks:
            return f"prompt needs {need} KV blocks but the pool has {self.block_manager.num_blocks}"
        return None

    def seed(self, params: SamplingParams, request_id: int, sample_index: int) -> int:
        """Sample i of a request with seed s uses s + i; else one derived from the engine's."""
        if params.seed is not None:
            return params.seed + sample_index
        return (self.config.seed * 1_000_003 + request_id * 7919 + sample_index) & 0x7FFFFFFF

    @property
    def has_unfinished(self) -> bool:
        return self.scheduler.has_unfinished or self._in_flight is not None

    # -- the step loop ----------------------------------------------------------------------
    def step(self) -> list[FinishedSample]:
        """Schedule and launch a step, collect one (this one; with asynchronous scheduling,
        the one launched before it) and return the samples that finished."""
        start, executed = time.perf_counter(), self.stats.execute_time_s
        step = self.scheduler.schedule()
        schedule_s = time.perf_counter() - start
        if step.is_empty and self._in_flight is None:
            raise RuntimeError(f"scheduler made no progress: {len(self.scheduler.running)} "
                               f"running, {len(self.scheduler.waiting)} waiting, "
                               f"{self.block_manager.num_free_blocks} free blocks")
        # An empty step: nothing is runnable until the step in flight is known.
        launched = None if step.is_empty else self._launch(step, schedule_s)
        if self.config.async_scheduling:
            to_collect, self._in_flight = self._in_flight, launched
        else:
            to_collect = launched
        finished = self._collect(to_collect) if to_collect else []
        elapsed = time.perf_counter() - start
        self.stats.schedule_time_s += elapsed - (self.stats.execute_time_s - executed)
        return finished

    def _launch(self, step: SchedulerOutput, schedule_s: float) -> _Launched:
        t = time.perf_counter()
        previous = self._in_flight.handle if self._in_flight else None
        launched = _Launched(step, self.runner.launch(step, previous), schedule_s)
        launched.launch_s = time.perf_counter() - t
        # Requests of this step count even if it is their last: the scheduler has already
        # freed a request whose length limit this step reaches (a one-step request ran too).
        s, requests = self.stats, self.scheduler.requests
        running = len(self.scheduler.running) + sum(
            1 for seq_id in step.requests
            if getattr(requests.get(seq_id), "status", None) == Status.FINISHED)
        s.execute_time_s += launched.launch_s
        s.num_steps, s.sum_running = s.num_steps + 1, s.sum_running + running
        s.peak_running = max(s.peak_running, running)
        return launched

    def _collect(self, launched: _Launched) -> list[FinishedSample]:
        t = time.perf_counter()
        result = self.runner.collect(launched.handle)  # waits for the device
        waited = time.perf_counter()
        self.stats.execute_time_s += waited - t
        self.stats.compression_time_s += result.compression_time_s
        updated = self.scheduler.update_from_output(launched.step, result, self.eos_token_ids,
                                                    self.detokenizer.stop_string_hit)
        now, finished = time.perf_counter(), []
        for seq in updated:
            seq.first_token_time = seq.first_token_time or now
            if seq.finish_reason is not None:
                seq.finish_time = now
                finished.append(FinishedSample(seq.request_id, self.detokenizer.completion(seq)))
        if self.on_step is not None:
            end = time.perf_counter()
            self.on_step(launched.step, result, StepTiming(
                launched.schedule_s, launched.launch_s, waited - t, end - waited, end))
        return finished

    # -- lifecycle --------------------------------------------------------------------------
    def abort_all(self) -> None:
        """Drop every request and the step in flight: all blocks free, no request queued,
        every query slot returned. For an interrupted or failed run; the engine stays usable."""
        in_flight, self._in_flight = self._in_flight, None
        if in_flight is not None:
            try:
                self.runner.collect(in_flight.handle)  # its writes land before the next run's
            except Exception:  # noqa: BLE001 - the run failed already; its results are dropped
                pass
        self.scheduler.abort_all()
        self.block_manager.reset()

    def reset_stats(self) -> None:
        self.stats = EngineStats()

    @property
    def kv_usage(self) -> float:
        """Fraction of KV blocks held by requests."""
        bm = self.block_manager
        return 1.0 - bm.num_free_blocks / max(bm.num_blocks, 1)
