"""The simulator's measurements on CUDA: step traces carry CUDA-event device times, and the
calibration's back-to-back launches (no collect in between) run and time every step.

    python -m pytest -m gpu tests/gpu/test_sim_gpu.py     (~1 min, tiny model)
"""
import pytest
import torch

from tests.engine.tiny_models import random_prompts, tiny_checkpoint
from zipage import LLM, SamplingParams
from zipage.sim.calibration import device_seconds, measure_grid
from zipage.sim.synthetic import calibration_grid
from zipage.sim.trace import StepTracer, summarize


@pytest.fixture(scope="module")
def folder():
    return tiny_checkpoint("qwen3")[0]


@pytest.mark.parametrize("async_scheduling", [False, True])
def test_trace_has_device_times(folder, async_scheduling):
    llm = LLM(folder, device="cuda", dtype="float32", block_size=16, budget=64,
              kv_cache_tokens=64 * 16, max_num_seqs=8, async_scheduling=async_scheduling)
    tracer = StepTracer.attach(llm)
    params = SamplingParams(temperature=0.7, max_tokens=150, ignore_eos=True)
    llm.generate(random_prompts([70, 3, 20, 41, 9, 100], vocab=384), params, use_tqdm=False)
    records = [dict(zip(tracer.table()["columns"], r)) for r in tracer.rows]
    assert len(records) == llm.last_stats.num_steps
    assert all(r["device_s"] is not None and r["device_s"] > 0 for r in records)
    t = summarize(records)
    assert t["device_s"] <= 1.05 * llm.last_stats.wall_time_s  # one stream: never more
    llm.shutdown()


def test_back_to_back_calibration_launches(folder):
    llm = LLM(folder, device="cuda", dtype="float32", block_size=16, budget=32,
              kv_cache_tokens=4096, max_num_seqs=32)
    runner = llm.runner
    points = calibration_grid(True, 16, 2, runner.num_kv_blocks * 16, 32, 256, 240,
                              rows=(1, 8, 32))
    grid = measure_grid(runner, points, 16, 2, SamplingParams(temperature=0.6),
                        log=lambda *_: None, warmup=1, sync_reps=1, reps=3)
    assert all(device_seconds(s) > 0 and len(s["device_s"]) == 3 for s in grid)
    torch.cuda.synchronize()
    llm.shutdown()
