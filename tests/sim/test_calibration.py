"""Calibration pieces on the CPU: synthetic steps have the features they were asked for and
run on the real runner, the grid stays inside the pool, the pool arithmetic is the engine's."""
import pytest
import torch

from zipage import LLM
from zipage.config import EngineConfig
from zipage.sampling_params import SamplingParams
from zipage.sim.calibration import fit_cost_model, host_phase_samples, measure_grid
from zipage.sim.cost_model import fixed_cost_model
from zipage.sim.features import step_features
from zipage.sim.shapes import DeviceMemory, model_spec, plan_pool
from zipage.sim.simulate import make_requests, simulate
from zipage.sim.synthetic import GridPoint, calibration_grid, kv_tokens, synthetic_step

PARAMS = SamplingParams(temperature=0.6)


def test_synthetic_step_has_the_asked_features():
    p = GridPoint(6, 40, prefill_rows=2, prefill_tokens=30, prefill_prefix=16, compressions=3,
                  compression_len=64)
    step = synthetic_step(p, 16, 200, num_kept_blocks=2, num_query_slots=8, params=PARAMS)
    f = step_features(step)
    C, b = 2, 16
    assert (f.decode_rows, f.prefill_rows, f.prefill_tokens) == (6, 2, 60)
    assert f.kv_read_tokens == 3 * 40 + 3 * (C * b + 1)  # compressed rows decode after it
    assert f.prefill_context_tokens == 2 * (16 + 30)
    assert (f.compressions, f.compressed_tokens) == (3, 3 * 64)
    for row in step.requests.values():
        assert len(set(row.block_table)) == len(row.block_table) and row.sampling is PARAMS
        assert len(row.block_table) * b >= row.phys_start + row.num_tokens
    for t in step.compressions.values():
        assert t.target_table == t.old_table[:C + 1]
        assert step.requests[t.seq_id].block_table == t.target_table


def test_synthetic_step_refuses_a_row_larger_than_the_pool():
    with pytest.raises(ValueError, match="the pool has 4"):
        synthetic_step(GridPoint(1, 100), 16, 4, None, 0, PARAMS)


@pytest.mark.parametrize("compressed", [False, True])
def test_grid_stays_inside_the_pool(compressed):
    pool = 750_000
    pts = calibration_grid(compressed, 256, 8 if compressed else None, pool, 512, 8192, 32768)
    assert all(kv_tokens(p) <= pool and p.decode_rows <= 512 for p in pts)
    assert any(p.prefill_rows for p in pts) and any(p.decode_rows == 512 for p in pts)
    assert any(p.compressions for p in pts) == compressed
    assert len({p.name for p in pts}) == len(pts)


@pytest.mark.parametrize("num_blocks", [24143, 24182])  # zipage/b32 pools of two H200 runs
def test_b32_grid_steps_stay_in_the_pool(num_blocks):
    """Every step of the zipage/b32 grid (C = 8, 512 query slots) over qwen3-8b's H200 pool:
    block ids inside the pool, no block read by two rows, decode tables within the CUDA
    graphs' C + 1 columns, compression targets the first C + 1 source blocks (in-place
    compaction) and every query slot exists."""
    b, C, slots = 32, 8, 512
    pts = calibration_grid(True, b, C, num_blocks * b, 512, 8192, 33152 - b)
    assert len(pts) == 35  # the points of the H200 logs
    for p in pts:
        step = synthetic_step(p, b, num_blocks, C, slots, PARAMS)
        owner = {}
        for row in step.requests.values():
            assert 0 <= row.query_slot < slots, p.name
            assert row.num_tokens > 1 or len(row.block_table) <= C + 1  # the graphs' width
            for blk in row.block_table:
                assert 0 <= blk < num_blocks and owner.setdefault(blk, row.seq_id) == row.seq_id
        for t in step.compressions.values():
            assert t.target_table == t.old_table[:C + 1] and 0 <= t.query_slot < slots
            assert all(owner.setdefault(blk, t.seq_id) == t.seq_id and 0 <= blk < num_blocks
                       for blk in t.old_table), p.name
            assert C * b < t.phys_len <= len(t.old_table) * b


@pytest.fixture(scope="module")
def zipage_llm(tiny_folder):
    return LLM(tiny_folder, device="cpu", block_size=16, budget=32, kv_cache_tokens=4096,
               max_num_seqs=8)


def test_grid_runs_on_the_real_runner_and_fits(zipage_llm):
    runner = zipage_llm.runner
    pool = runner.num_kv_blocks * 16
    pts = calibration_grid(True, 16, 2, pool, 8, 64, 240, rows=(1, 4, 8))
    grid = measure_grid(runner, pts, 16, 2, PARAMS, log=lambda *_: None, warmup=0,
                        sync_reps=1, reps=2)
    assert len(grid) == len(pts) and all(s["device_s"][0] > 0 for s in grid)
    assert not runner.time_steps  # left as found
    opts = dict(device="cpu", block_size=16, budget=32, kv_cache_tokens=4096, max_num_seqs=8)
    host = host_phase_samples(lambda **kw: simulate(
        zipage_llm.config.model, opts, make_requests([200] * 8, 20), fixed_cost_model(),
        spec=zipage_llm.spec, **kw), max_steps=30)
    assert len(host) == 29  # asynchronous (the default): the 30th step is still in flight
    cost = fit_cost_model(grid, host, {"engine": "zipage"})
    assert set(cost.meta["fit"]) == {"device", "launch", "schedule", "post"}
    assert cost.device_s(step_features(synthetic_step(pts[0], 16, 256, 2, 8, PARAMS))) > 0


def test_pool_arithmetic_is_the_engines():
    spec = model_spec("qwen3-8b")
    cfg = EngineConfig.from_kwargs("qwen3-8b", load_format="dummy", budget=2048, max_num_seqs=512,
                                   use_global_score=True)
    gib = 2**30
    plan = plan_pool(spec, cfg, torch.bfloat16, 33000, DeviceMemory(80 * gib, 20 * gib, "test"))
    block = 36 * 8 * (2 * 128 + 1) * 256 * 2  # L * H_kv * (2D + score) * b * bf16
    slot = 36 * 16 * 32 * 128 * 2
    assert plan.block_bytes == block and plan.num_query_slots == 512
    assert plan.num_blocks == int((80 * gib * 0.9 - 20 * gib - 512 * slot) // block)
    with pytest.raises(RuntimeError, match="no GPU memory left"):
        plan_pool(spec, cfg, torch.bfloat16, 33000, DeviceMemory(20 * gib, 20 * gib, "test"))
    explicit = EngineConfig.from_kwargs("qwen3-8b", load_format="dummy", kv_cache_tokens=1000)
    assert plan_pool(spec, explicit, torch.bfloat16, 33000, None).num_blocks == 4  # ceil(1000/256)


class _ThrottlingRunner:
    """Device time 10 ms for the first launches, then 13 ms (a clock that drops under load);
    launch/collect bookkeeping checked: never more than ``limit`` steps in flight."""

    def __init__(self, limit):
        self.time_steps, self.launched, self.collected, self.limit = False, 0, 0, limit

    def launch(self, step, previous):
        self.launched += 1
        assert self.launched - self.collected <= self.limit
        return self.launched

    def collect(self, handle):
        self.collected += 1
        return type("Result", (), {"device_time_s": 0.010 if handle <= 6 else 0.013})()


def test_sustained_point_times_the_clock_it_settles_at():
    from zipage.sim.calibration import device_seconds, time_point
    burst = time_point(_ThrottlingRunner(3), None, warmup=1, sync_reps=1, reps=3)
    assert device_seconds(burst) == 0.010 and "sustained_device_s" not in burst
    runner = _ThrottlingRunner(3)
    sample = time_point(runner, None, warmup=1, sync_reps=1, reps=3, sustain_s=0.02,
                        in_flight=3)
    assert len(sample["device_s"]) == 3 and runner.launched == runner.collected
    assert len(sample["sustained_device_s"]) >= 4
    assert device_seconds(sample) == 0.013  # the second half, after the drop
    assert not runner.time_steps


def test_random_inputs_give_each_row_its_own_tokens_and_fill_the_caches(zipage_llm):
    from zipage.sim.calibration import random_token_ids, randomize_caches
    step = synthetic_step(GridPoint(8, 40, prefill_rows=1, prefill_tokens=30), 16, 200, None, 0,
                          PARAMS, random_token_ids(1000, seed=3))
    decode = [r.token_ids for r in step.requests.values() if r.num_tokens == 1]
    assert len({t[0] for t in decode}) > 4 and all(0 <= t[0] < 1000 for t in decode)
    assert len(set(step.requests[8].token_ids)) > 10  # the prefill chunk too
    constant = synthetic_step(GridPoint(8, 40), 16, 200, None, 0, PARAMS)
    assert {r.token_ids[0] for r in constant.requests.values()} == {1}
    runner = zipage_llm.runner
    randomize_caches(runner, seed=1)
    for cache in (runner.kv_cache, runner.query_cache):
        assert cache.float().std().item() == pytest.approx(1.0, abs=0.05)


def test_measure_grid_names_the_inputs_it_accepts(zipage_llm):
    with pytest.raises(ValueError, match="random, constant"):
        measure_grid(zipage_llm.runner, [GridPoint(1, 32)], 16, 2, PARAMS, inputs="zeros")


@pytest.mark.parametrize("compressed", [False, True])
def test_grid_of_one_or_two_batch_sizes_is_built(compressed):
    """`calibrate --rows 128 256 --only ...` (a probe of two batch sizes) raised IndexError:
    the mixed points took the 2nd and 3rd batch size; they take the largest there is."""
    for rows in ((128, 256), (64,)):
        pts = calibration_grid(compressed, 256, 8 if compressed else None, 800_000, 512,
                               8192, 32768, rows=rows)
        decode_rows = {p.decode_rows for p in pts if p.decode_rows and not p.prefill_rows
                       and not p.compressions}
        assert decode_rows == set(rows)
        assert any(p.prefill_rows for p in pts)
