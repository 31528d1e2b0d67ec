"""Where a decode step goes on the GPU: host phases vs GPU kernel time.

    python -m scripts.bench profile                       # the long-reasoning Zipage workload
    python -m scripts.bench profile --budget 0 --enforce-eager --python-profile 12
    python -m scripts.bench profile --budget 0 --num-requests 512 --decode-only

--decode-only profiles only steps in which every request decodes one token (the profiler
starts once every prefill is done and stops --steps steps later), so the kernel table is a
decode step's, not an average over prefill and decode.

Default workload: the long-reasoning benchmark's (192 requests, Qwen3-8B shape, budget 256,
block 32, temperature 0.6, CUDA graphs). Prints wall time per step, GPU kernel time per step
(is the GPU idle waiting for the host?), host time per engine phase, and the top GPU
kernels; with --python-profile, also the host's hottest Python functions (cProfile, a
separate run: it slows the host down).
"""
import cProfile
import importlib
import pstats
import time

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from scripts import common as bc
from scripts.arg_types import count_or_zero, positive_int, temperature
from zipage import LLM, SamplingParams

# Engine methods timed as host phases: (object path from the LLM or a module, attribute).
# A phase the engine no longer has is reported as not timed, never silently dropped.
PHASES = [("scheduler", "schedule"), ("module:zipage.worker.model_runner", "build_batch"),
          ("runner", "_forward"), ("runner", "_sample"), ("runner", "collect"),
          ("runner.compressor", "run"), ("scheduler", "update_from_output")]


def add_arguments(p):
    bc.add_model_arguments(p, cpu_smoke=False)
    bc.add_common_arguments(p)
    p.add_argument("--num-requests", type=positive_int, default=192)
    p.add_argument("--prompt-len", type=positive_int, default=128)
    p.add_argument("--steps", type=positive_int, default=64, help="decode steps profiled")
    p.add_argument("--temperature", type=temperature, default=0.6)
    p.add_argument("--budget", type=count_or_zero, default=256,
                   help="KV budget in tokens; 0 = Full KV")
    p.add_argument("--block-size", type=positive_int, default=32)
    bc.add_scoring_arguments(p)
    p.add_argument("--kv-cache-tokens", type=positive_int, default=200000)
    p.add_argument("--max-model-len", type=positive_int, default=8192)
    p.add_argument("--enforce-eager", action="store_true", help="no CUDA graphs for decode")
    p.add_argument("--top-kernels", type=positive_int, default=20,
                   help="rows of the GPU kernel table")
    p.add_argument("--decode-only", action="store_true",
                   help="profile --steps steps after every prefill is done (no prefill kernels)")
    p.add_argument("--python-profile", type=count_or_zero, default=0, metavar="N",
                   help="also print the N Python functions with the most own time (cProfile)")


def _resolve(llm, path: str):
    if path.startswith("module:"):
        return importlib.import_module(path[len("module:"):])
    obj = llm
    for name in path.split("."):
        obj = getattr(obj, name)
    return obj


def time_phases(llm) -> list[str]:
    """Wrap each phase in a profiler range; returns the phases this engine does not have."""
    missing = []
    for path, name in PHASES:
        try:
            obj = _resolve(llm, path)
            fn = getattr(obj, name)
        except AttributeError:
            missing.append(f"{path}.{name}")
            continue

        def wrapper(*args, _fn=fn, _label=f"phase::{name}", **kwargs):
            with record_function(_label):
                return _fn(*args, **kwargs)

        setattr(obj, name, wrapper)
    return missing


class DecodeWindow:
    """engine.on_step callback: calls start() once a collected step has only one-token rows
    (every prefill done), and stop() `steps` collected steps later. With asynchronous
    scheduling the next step is already queued at either end, so the window is `steps`
    steps give or take one."""

    def __init__(self, steps: int, start, stop):
        self.steps, self.start, self.stop = steps, start, stop
        self.counted, self.t0, self.wall_s = 0, None, None

    def __call__(self, step, result, timing) -> None:
        if self.wall_s is not None:
            return
        if self.t0 is None:
            if step.requests and all(r.num_tokens == 1 for r in step.requests.values()):
                self.start()
                self.t0 = time.perf_counter()
            return
        self.counted += 1
        if self.counted == self.steps:
            self.stop()
            self.wall_s = time.perf_counter() - self.t0


def profile_decode_window(llm, prompts, a):
    """(profiler, steps, wall seconds) of --steps decode-only steps of one generate call."""
    prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])

    def stop():
        torch.cuda.synchronize()
        prof.stop()
    window = DecodeWindow(a.steps, prof.start, stop)
    llm.engine.on_step = window
    params = SamplingParams(temperature=a.temperature, seed=a.seed, max_tokens=a.steps + 8,
                            ignore_eos=True)
    try:
        llm.generate(prompts, params, use_tqdm=False)
    finally:
        llm.engine.on_step = None
    if window.wall_s is None:
        raise SystemExit(f"--decode-only: fewer than {a.steps} decode-only steps ran")
    return prof, a.steps, window.wall_s


def main(a) -> int:
    device = bc.device_for(a)
    if device.type != "cuda":
        raise SystemExit("profile needs a CUDA GPU")
    model, opts, _ = bc.engine_model(a, device)
    budget = a.budget or None
    if budget is not None:
        opts.update(budget=budget, compression=bc.scoring(a))
    workload = {k: getattr(a, k) for k in ("model", "num_requests", "prompt_len", "steps",
                                           "temperature", "block_size", "kv_cache_tokens",
                                           "max_model_len", "enforce_eager", "dtype", "seed",
                                           "decode_only", "kv_cache_dtype")}
    workload.update(budget=budget, scoring=a.scoring if budget else None)
    env = bc.print_header(device, workload)
    llm = LLM(model, **opts, block_size=a.block_size, max_num_seqs=a.num_requests,
              kv_cache_tokens=a.kv_cache_tokens, max_model_len=a.max_model_len,
              enforce_eager=a.enforce_eager)
    vocab = bc.prompt_vocab(model)
    prompts = bc.random_prompts(a.num_requests, a.prompt_len, vocab, a.seed)
    warm_len = (budget or a.prompt_len) + 2 * a.block_size  # compresses right after prefill
    warm = bc.random_prompts(a.num_requests, warm_len, vocab, a.seed + 1)
    llm.generate(warm, SamplingParams(max_tokens=4, ignore_eos=True), use_tqdm=False)
    missing = time_phases(llm)
    params = SamplingParams(temperature=a.temperature, seed=a.seed, max_tokens=a.steps,
                            ignore_eos=True)
    if a.decode_only:
        prof, steps, wall = profile_decode_window(llm, prompts, a)
    else:
        llm.generate(prompts, params, use_tqdm=False)  # same shapes once, outside the profile
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            t0 = time.perf_counter()
            llm.generate(prompts, params, use_tqdm=False)
            torch.cuda.synchronize()
            wall = time.perf_counter() - t0
        steps = llm.last_stats.num_steps
    st = llm.last_stats
    events = prof.key_averages()
    kernel_us = sum(e.self_device_time_total for e in events
                    if e.device_type == torch.autograd.DeviceType.CUDA)
    print(f"\nsteps {steps}, wall {wall * 1e3 / steps:.2f} ms/step (profiler on), GPU kernel time "
          f"{kernel_us / 1e3 / steps:.2f} ms/step ({100 * kernel_us / 1e6 / wall:.0f}% busy), "
          f"compressions {st.num_compressions}; engine stats (the whole generate call, "
          f"{st.num_steps} steps): schedule {st.schedule_time_s / st.num_steps * 1e3:.2f}, "
          f"execute {st.execute_time_s / st.num_steps * 1e3:.2f} ms/step")
    print("host phases (CPU ms/step, inclusive):")
    phases = {}
    for e in sorted(events, key=lambda e: -e.cpu_time_total):
        if e.key.startswith("phase::"):
            phases[e.key[7:]] = e.cpu_time_total / 1e3 / steps
            print(f"  {e.key[7:]:<14}{phases[e.key[7:]]:8.2f}  ({e.count} calls)")
    if missing:
        print(f"  (not in this engine, not timed: {', '.join(missing)})")
    print(events.table(sort_by="self_cuda_time_total", row_limit=a.top_kernels,
                       max_name_column_width=70))
    if a.python_profile:
        pr = cProfile.Profile()
        pr.enable()
        llm.generate(prompts, params, use_tqdm=False)
        torch.cuda.synchronize()
        pr.disable()
        print(f"host Python functions by own time (cProfile run, "
              f"{llm.last_stats.num_steps} steps):")
        pstats.Stats(pr).sort_stats("tottime").print_stats(a.python_profile)
    top = sorted((e for e in events if e.self_device_time_total > 0),
                 key=lambda e: -e.self_device_time_total)[:a.top_kernels]
    kernels = [dict(name=e.key, ms_per_step=e.self_device_time_total / 1e3 / steps,
                    calls=e.count) for e in top]  # the table's rows, for comparing runs
    bc.write_json(a.json, dict(environment=env, workload=workload, wall_ms_per_step=wall * 1e3 /
                               steps, gpu_kernel_ms_per_step=kernel_us / 1e3 / steps,
                               host_phase_ms_per_step=phases, top_device_ms_per_step=kernels,
                               stats=st.as_dict()))
    return 0
