"""Calibration: time synthetic steps on a real runner, time the real scheduler's host work,
fit the cost model (zipage/sim/cost_model.py). ``bench calibrate`` drives it.

Each grid point is launched ``warmup`` times (compiles, caches), then ``sync_reps`` times
launch-then-collect (the host launch time: nothing queued ahead), then ``reps`` times back
to back without collecting (the device time of a step with the device kept busy: CUDA
events, the first of them dropped). Host work outside the runner (scheduling, applying
results) is measured by running the real engine on a SimRunner: the same Python, no model.

The first back-to-back launch finds the device idle (a collect came just before), as every
launch of a synchronous engine does: its CUDA events start when the host starts launching,
so its time minus the busy-device time is the device's idle start (the ``start`` phase:
the host builds and copies the step's inputs before the first kernel can run).

With ``sustain_s`` > 0 the point then runs back to back for that long and its device time
is the median of the second half of those steps: a GPU at its power limit lowers its clock
within a fraction of a second of a compute-bound load (the H200 at 700 W: 1,980 MHz in a
short burst, about 1,500 MHz in decode at 256 rows), so a few repetitions time the burst
clock, not the one a long run sees (docs/throughput_model.md, "Power limit").

With ``inputs="random"`` (what ``bench calibrate`` uses) every row gets its own token ids
and the KV pool, window queries and scores hold random values, as in a real batch: with one
token id everywhere and a pool of zeros every row of every GEMM is the same, which draws less
power, so a power-limited GPU keeps a higher clock than it does in the engine.
"""
import random
import statistics
import time

import torch

from zipage.sampling_params import SamplingParams
from zipage.sim.cost_model import HOST_PHASES, CostModel, LinearModel, fit_error, fit_linear
from zipage.sim.features import StepFeatures, step_features
from zipage.sim.synthetic import GridPoint, synthetic_step


def time_point(runner, step, warmup: int = 1, sync_reps: int = 2, reps: int = 4,
               sustain_s: float = 0.0, in_flight: int = 3) -> dict:
    runner.time_steps = True
    sustained = []
    try:
        for _ in range(warmup):
            runner.collect(runner.launch(step, None))
        launch = []
        for _ in range(sync_reps):
            t = time.perf_counter()
            handle = runner.launch(step, None)
            launch.append(time.perf_counter() - t)
            runner.collect(handle)
        handles = [runner.launch(step, None) for _ in range(reps)]
        device = [runner.collect(h).device_time_s for h in handles]
        if sustain_s > 0:
            sustained = _sustain(runner, step, sustain_s, in_flight)
    finally:
        runner.time_steps = False
    out = {"device_s": device, "launch_s": launch}
    if sustained:
        out["sustained_device_s"] = sustained
    return out


def _sustain(runner, step, seconds: float, in_flight: int) -> list[float]:
    """Device times of the step launched back to back for ``seconds`` (wall), at most
    ``in_flight`` launched and not collected, so the device never idles."""
    queue, times, t0 = [], [], time.perf_counter()
    while time.perf_counter() - t0 < seconds or len(times) + len(queue) < 4:
        queue.append(runner.launch(step, None))
        if len(queue) >= in_flight:
            times.append(runner.collect(queue.pop(0)).device_time_s)
    times.extend(runner.collect(h).device_time_s for h in queue)
    return times


def device_seconds(sample: dict) -> float:
    """The point's busy-device step time: the second half of its sustained run if it has
    one, else its back-to-back repetitions after the first."""
    if sample.get("sustained_device_s"):
        d = sample["sustained_device_s"]
        return statistics.median(d[len(d) // 2:])
    d = sample["device_s"]
    return statistics.median(d[1:] if len(d) > 1 else d)


def start_seconds(sample: dict) -> float | None:
    """Idle device time at the start of this point launched on an idle device: the first
    back-to-back repetition minus the busy-device time. None where the repetitions scatter
    more than that difference (noisy eager prefills) or there is no first repetition."""
    d = sample["device_s"]
    if len(d) < 3:
        return None
    rest = d[1:]
    start, spread = d[0] - statistics.median(rest), max(rest) - min(rest)
    return start if start > spread else None


def fit_start(grid: list[dict]) -> tuple[LinearModel, dict] | None:
    """The start phase, fitted like the other host phases to the points that measure it;
    None if none does (fewer than 3 back-to-back repetitions: no start phase, start 0)."""
    usable = [(StepFeatures(**s["features"]), t) for s in grid
              if (t := start_seconds(s)) is not None]
    if not usable:
        return None
    return fit_linear([f for f, _ in usable], [t for _, t in usable])


INPUTS = ("random", "constant")


@torch.inference_mode()
def randomize_caches(runner, seed: int = 0) -> None:
    """Standard-normal KV pool, window queries and scores (one layer at a time: a bfloat16
    buffer as large as the pool would not fit beside it)."""
    gen = torch.Generator(device=runner.device).manual_seed(seed)
    for cache in (runner.kv_cache, runner.query_cache, runner.score_cache):
        if cache is None:
            continue
        for part in cache.flatten(0, 1) if cache is runner.kv_cache else cache:
            if part.dtype in (torch.float16, torch.bfloat16, torch.float32):
                part.normal_(generator=gen)
            else:  # fp8: drawn in bfloat16, cast on copy
                part.copy_(torch.randn(part.shape, generator=gen, device=part.device,
                                       dtype=torch.bfloat16))
    if runner.kv_scale is not None:
        runner.kv_scale.fill_(1.0)


def random_token_ids(vocab_size: int, seed: int = 0):
    rng = random.Random(seed)
    return lambda n: [rng.randrange(vocab_size) for _ in range(n)]


def measure_grid(runner, points: list[GridPoint], block_size: int, num_kept_blocks: int | None,
                 params: SamplingParams, log=print, inputs: str = "random", seed: int = 0,
                 **reps) -> list[dict]:
    if inputs not in INPUTS:
        raise ValueError(f"inputs={inputs!r}: expected one of {', '.join(INPUTS)}")
    token_ids = None
    if inputs == "random":
        randomize_caches(runner, seed)
        token_ids = random_token_ids(runner.spec.vocab_size, seed)
    samples = []
    for i, p in enumerate(points):
        step = synthetic_step(p, block_size, runner.num_kv_blocks, num_kept_blocks,
                              runner.num_query_slots, params, token_ids)
        t = time_point(runner, step, **reps)
        samples.append({"name": p.name, "point": p.as_dict(),
                        "features": step_features(step).as_dict(), **t})
        log(f"  [{i + 1}/{len(points)}] {p.name}: device {device_seconds(t) * 1e3:.2f} ms, "
            f"launch {statistics.median(t['launch_s']) * 1e3:.2f} ms")
    return samples


def host_phase_samples(simulate_fn, max_steps: int) -> list[dict]:
    """(features, schedule_s, post_s) of the real scheduler's steps, from a run of
    ``simulate_fn(on_step=..., max_steps=...)`` (a SimRunner: no model, same host Python)."""
    rows = []

    def record(step, result, timing):
        rows.append({"features": step_features(step).as_dict(), "schedule_s": timing.schedule_s,
                     "post_s": timing.post_s})

    simulate_fn(on_step=record, max_steps=max_steps)
    return rows


def row_knots(samples: list[dict]) -> tuple[int, ...]:
    """The table T(rows) has a knot at every row count of a decode-only point."""
    knots = {StepFeatures(**s["features"]).rows for s in samples
             if not StepFeatures(**s["features"]).is_mixed}
    return tuple(sorted(k for k in knots if k > 0)) or (1,)


def fit_cost_model(grid: list[dict], host: list[dict], meta: dict) -> CostModel:
    """Device and launch models from the grid, schedule and post models from the host run;
    fit errors go to meta["fit"]."""
    feats = [StepFeatures(**s["features"]) for s in grid]
    device, device_err = fit_linear(feats, [device_seconds(s) for s in grid], row_knots(grid))
    launch, launch_err = fit_linear(feats, [statistics.median(s["launch_s"]) for s in grid])
    models, errors = {"launch": launch}, {"device": device_err, "launch": launch_err}
    host_feats = [StepFeatures(**s["features"]) for s in host]
    for phase in ("schedule", "post"):
        times = [max(s[f"{phase}_s"], 1e-7) for s in host]
        models[phase], errors[phase] = fit_linear(host_feats, times)
    assert set(models) == set(HOST_PHASES)
    if (start := fit_start(grid)) is not None:
        models["start"], errors["start"] = start
    return CostModel(device, models, {**meta, "fit": errors})


def prediction_error(model: LinearModel, grid: list[dict]) -> dict:
    feats = [StepFeatures(**s["features"]) for s in grid]
    return fit_error(model, feats, [device_seconds(s) for s in grid])
