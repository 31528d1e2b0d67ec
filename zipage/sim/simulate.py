"""Simulate one engine on a workload: the real LLMEngine (Scheduler, BlockManager: same pool
sizing, preemption, compression trigger and block accounting) driving a SimRunner.

Requests end at their drawn output length through ``max_tokens`` with ``ignore_eos`` (the
measured benchmarks' own rule), so step, preemption and compression counts are the
engine's; only time is modeled.
"""
import random
import time
from dataclasses import dataclass

import torch

from zipage.config import EngineConfig
from zipage.engine.llm_engine import LLMEngine
from zipage.models.spec import ModelSpec
from zipage.sampling_params import SamplingParams
from zipage.sim.cost_model import CostModel
from zipage.sim.lengths import ReplayedSample
from zipage.sim.report import engine_entry
from zipage.sim.shapes import DeviceMemory, kv_bytes_per_token, model_spec, parameter_counts, \
    itemsize, plan_pool
from zipage.sim.sim_runner import SimRunner

PROMPT_VOCAB = 150_000  # random prompt ids below this (as the measured benchmarks draw them)


@dataclass(frozen=True)
class SimRequest:
    group: int  # requests of a group share their prompt (the n samples of one problem)
    prompt_len: int
    output_len: int


def make_requests(lengths: list[int], prompt_len: int,
                  samples_per_prompt: int = 1) -> list[SimRequest]:
    return [SimRequest(i // samples_per_prompt, prompt_len, n) for i, n in enumerate(lengths)]


def replay_requests(samples: list[ReplayedSample]) -> list[SimRequest]:
    """A harness run's samples in its order; samples of one problem share a prompt."""
    groups: dict[str, int] = {}
    return [SimRequest(groups.setdefault(s.problem_id, len(groups)), s.prompt_tokens,
                       s.completion_tokens) for s in samples]


def engine_config(model: str, options: dict) -> EngineConfig:
    return EngineConfig.from_kwargs(model, **options)


def simulate(model: str, options: dict, requests: list[SimRequest], cost: CostModel,
             memory: DeviceMemory | None = None, seed: int = 0, temperature: float = 0.6,
             copy_bandwidth_Bps: float | None = None, log_every_s: float | None = None,
             spec: ModelSpec | None = None, on_step=None, max_steps: int | None = None) -> dict:
    """Run the workload through the engine on a SimRunner; a report engine entry
    (zipage/sim/report.py) plus the simulation's own totals. ``spec``: the model's shape
    when ``model`` is not a preset or folder; ``on_step``: LLMEngine.on_step (host timings
    of the real scheduler); ``max_steps``: stop there (calibration of host costs)."""
    cfg = engine_config(model, options)
    spec = spec or model_spec(model)
    dtype = cfg.torch_dtype(torch.device("cpu" if cfg.device == "cpu" else "cuda"))
    max_model_len = cfg.max_model_len or spec.max_position_embeddings
    plan = plan_pool(spec, cfg, dtype, max_model_len, memory)
    cost = cost.for_engine(cfg.max_num_seqs, cfg.enforce_eager)
    runner = SimRunner(plan.num_blocks, plan.num_query_slots, cost, spec.vocab_size)
    engine = LLMEngine(cfg, runner, None, set(), max_model_len, spec.vocab_size)
    engine.on_step = on_step
    rng = random.Random(seed)
    vocab = min(PROMPT_VOCAB, spec.vocab_size)
    prompts: dict[int, list[int]] = {}
    for i, r in enumerate(requests):
        prompt = prompts.setdefault(r.group, [rng.randrange(vocab) for _ in range(r.prompt_len)])
        # no per-request seed: the engine derives a distinct one per request, so the
        # simulated tokens of two samples of a prompt differ (as sampled ones do)
        engine.add_request(i, prompt, SamplingParams(temperature=temperature,
                                                     max_tokens=r.output_len, ignore_eos=True))
    started, last_log, output_tokens = time.perf_counter(), time.perf_counter(), 0
    while engine.has_unfinished:
        if max_steps is not None and engine.stats.num_steps >= max_steps:
            engine.abort_all()
            break
        for _, completion in engine.step():
            output_tokens += len(completion.token_ids)
        if log_every_s and time.perf_counter() - last_log > log_every_s:
            last_log = time.perf_counter()
            print(f"  ... {output_tokens} tokens finished, {engine.stats.num_steps} steps, "
                  f"virtual {runner.now:.1f} s, running {len(engine.scheduler.running)}",
                  flush=True)
    t, s = runner.totals, engine.stats
    weights = parameter_counts(spec)[1] * itemsize(dtype)
    bytes_read = t.steps * weights + t.kv_read_tokens * kv_bytes_per_token(spec, dtype,
                                                                           cfg.kv_cache_dtype)
    return engine_entry(
        output_tokens=output_tokens, wall_time_s=runner.now, steps=s.num_steps,
        mean_running=s.sum_running / max(s.num_steps, 1),
        preemptions=engine.scheduler.num_preemptions,
        compressions=engine.scheduler.num_compressions, num_kv_blocks=plan.num_blocks,
        block_size=cfg.block_size, options=options, bytes_read=bytes_read,
        copy_bandwidth_Bps=copy_bandwidth_Bps, peak_running=s.peak_running,
        device_busy_s=t.device_busy_s, host_s=t.host_s, compression_s=t.compression_s,
        mean_decode_context=t.decode_kv_tokens / max(t.decode_rows, 1),
        pool_source="kv_cache_tokens" if cfg.kv_cache_tokens is not None else memory.source,
        simulation_cpu_s=time.perf_counter() - started)
