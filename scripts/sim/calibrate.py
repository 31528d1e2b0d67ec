"""Step-cost calibration: times decode, mixed and compressing steps of the real runner over a
grid (rows, KV read, prefill tokens, compressions) for Full KV and Zipage, times the real
scheduler's host work, fits the cost model of zipage/sim/cost_model.py and writes
results/bench/step_cost_<gpu>_<model>.json (raw timings, fitted models, fit errors, the
memory the model leaves for the KV pool, copy bandwidth).

    python -m scripts.bench calibrate --model qwen3-8b       # GPU: one runner per config
    python -m scripts.bench calibrate --cpu-smoke --out /tmp/step_cost_cpu.json
    python -m scripts.bench calibrate --from-trace T.json.gz --base step_cost.json --out X.json
    python -m scripts.bench calibrate --add-start --base step_cost.json --out step_cost.json
    python -m scripts.bench calibrate --host-from-trace T.json.gz --base step_cost.json --out X.json
    python -m scripts.bench calibrate --merge one_config.json --add-start --base step_cost.json \
        --out step_cost.json
    python -m scripts.bench calibrate --decode-waves --base step_cost.json --out step_cost.json

One model is built; each config (engine/block size) builds its runner on it (pool, query
slots, CUDA graphs), times its grid, and frees it. --from-trace refits a calibration to the
steps of measured runs (`bench long --trace`) instead; --add-start fits the idle-start phase
of an older file from its raw grid (refit.py; both on the CPU).
"""
import dataclasses
import gc
import os
import time

import torch

from scripts import common as bc
from scripts.arg_types import count_or_zero, positive_int, seconds_or_zero, temperature
from scripts.throughput.roofline import copy_bandwidth
from zipage.config import EngineConfig
from zipage.models.loader import build_model, load_hf_config, resolve
from zipage.models.spec import spec_from_hf_config
from zipage.sampling_params import SamplingParams
from zipage.sim.calibration_file import CALIBRATION_FORMAT, config_key
from zipage.sim.calibration import INPUTS, fit_cost_model, host_phase_samples, measure_grid
from zipage.sim.cost_model import fixed_cost_model
from zipage.sim.simulate import make_requests, simulate
from zipage.sim.synthetic import calibration_grid
from zipage.sim.waves_fit import refit_waves
from zipage.worker.model_runner import ModelRunner

PROBE_FORMAT = "zipage-step-probe/1"  # --only: raw timings of some points, not a cost model
DEFAULT_CONFIGS = ["fullkv/b256", "zipage/b256", "zipage/b32", "fullkv/b32"]
DEFAULT_ROWS = (1, 8, 32, 64, 128, 256, 384, 512)


def add_arguments(p):
    bc.add_model_arguments(p)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--configs", nargs="+", default=DEFAULT_CONFIGS, metavar="ENGINE/bB",
                   help=f"engine (fullkv|zipage) and block size "
                        f"(default {' '.join(DEFAULT_CONFIGS)})")
    p.add_argument("--budget-blocks", type=positive_int, default=8,
                   help="Zipage C: budget = C x block")
    p.add_argument("--max-num-seqs", type=positive_int, default=512, help="largest batch timed")
    p.add_argument("--rows", type=positive_int, nargs="+", default=list(DEFAULT_ROWS),
                   help="decode batch sizes of the grid (default %(default)s)")
    p.add_argument("--max-num-batched-tokens", type=positive_int, default=8192)
    p.add_argument("--max-model-len", type=positive_int, default=128 + 32768 + 256)
    p.add_argument("--temperature", type=temperature, default=0.6, help="sampling of every row")
    p.add_argument("--warmup", type=count_or_zero, default=1)
    p.add_argument("--sync-reps", type=positive_int, default=1,
                   help="launch-then-collect repetitions")
    p.add_argument("--reps", type=positive_int, default=3,
                   help="back-to-back repetitions (device time: the first is dropped)")
    p.add_argument("--sustain-s", type=seconds_or_zero, default=0.5,
                   help="then run each point back to back this long and time the second half: "
                        "the clock a power-limited GPU holds under that load (0: burst only)")
    p.add_argument("--inputs", choices=INPUTS, default="random",
                   help="random: each row its own token ids, a pool of random values (a real "
                        "batch's power draw); constant: token 1 and a pool of zeros (the "
                        "calibrations before 2026-12-04)")
    p.add_argument("--only", nargs="+", metavar="NAME",
                   help="time only the grid points whose name contains one of these (e.g. "
                        "'decode 256x128'): a probe of raw timings, written as "
                        "step_probe_*.json, not a cost model (no fit, no host timing)")
    p.add_argument("--host-steps", type=positive_int, default=300,
                   help="scheduler steps timed per config")
    bc.add_scoring_arguments(p)
    p.add_argument("--out", help="default results/bench/step_cost_<gpu>_<model>.json")
    p.add_argument("--from-trace", nargs="+", metavar="TRACE",
                   help="refit --base to the steps of these traces (CPU; no timing grid)")
    p.add_argument("--add-start", action="store_true",
                   help="fit the idle-start phase of --base from its raw grid (CPU)")
    p.add_argument("--merge", nargs="+", metavar="CALIBRATION",
                   help="copy the configs of these calibration files (same GPU and model, "
                        "configs --base lacks) into --base (CPU); with --add-start their "
                        "start phase is fitted, the base's configs are left as they are")
    p.add_argument("--host-from-trace", nargs="+", metavar="TRACE",
                   help="refit the schedule and post phases (host work outside the runner) of "
                        "every config of --host-engines to these traces' steps (CPU)")
    p.add_argument("--host-engines", nargs="+", default=["fullkv"], choices=["fullkv", "zipage"],
                   help="engines whose traced steps --host-from-trace fits (default fullkv)")
    p.add_argument("--host-configs", nargs="+", metavar="ENGINE/bB",
                   help="--host-from-trace refits only these configs (default: all of "
                        "--host-engines)")
    p.add_argument("--merge-note", help="where the merged configs were measured (in words)")
    p.add_argument("--replace", action="store_true",
                   help="with --merge: a config --base already has is replaced (recalibrated "
                        "after a kernel change); without it such a merge is refused")
    p.add_argument("--decode-waves", action="store_true",
                   help="refit every config's device model of --base with the decode kernel's "
                        "waves fitted to its raw grid (CPU; docs/throughput_model.md)")
    p.add_argument("--base", help="calibration file that --merge / --from-trace / --add-start "
                                  "refit")


def parse_config(text: str) -> tuple[str, int]:
    engine, _, block = text.partition("/b")
    if engine not in ("fullkv", "zipage") or not block.isdigit():
        raise SystemExit(f"--configs: {text!r} is not ENGINE/bBLOCK (e.g. zipage/b256)")
    return engine, int(block)


def slug(text: str) -> str:
    return text.lower().replace("nvidia ", "").replace(" ", "-").replace("/", "-")


def runner_options(a, engine: str, block: int, base: dict) -> dict:
    opts = dict(base, block_size=block, max_num_seqs=a.max_num_seqs,
                max_num_batched_tokens=a.max_num_batched_tokens, max_model_len=a.max_model_len)
    if engine == "zipage":
        opts.update(budget=a.budget_blocks * block, compression=dataclasses.asdict(bc.scoring(a)))
    return opts


def host_workloads(a, engine: str, pool: int) -> list[tuple[int, int]]:
    """(requests, prompt length) of the scheduler runs whose host time is fitted: batch
    sizes from small to the largest and, for Full KV, long contexts (wide block tables)."""
    n = a.max_num_seqs
    long_prompt = min(16384, a.max_model_len // 2, pool // (2 * max(1, n // 16)))
    if engine == "zipage":
        return [(n, 128), (max(1, n // 4), 128), (max(1, n // 16), 128)]
    return [(n, 128), (max(1, n // 4), long_prompt // 8), (max(1, n // 16), long_prompt)]


def release(runner: ModelRunner, device) -> None:
    """Free a runner's caches and graphs; the model stays for the next runner."""
    for layer in runner.model.model.layers:
        layer.self_attn.k_cache = layer.self_attn.v_cache = layer.self_attn.q_cache = None
    runner.graphs = runner.compressor = None
    runner.kv_cache = runner.query_cache = runner.score_cache = None
    gc.collect()
    bc.free_memory(device)


def calibrate_config(a, text, model, spec, model_name, base, device, dtype) -> tuple[dict, dict]:
    engine, block = parse_config(text)
    opts = runner_options(a, engine, block, base)
    cfg = EngineConfig.from_kwargs(model_name, **opts)
    t0 = time.perf_counter()
    runner = ModelRunner(cfg, model, device, dtype, a.max_model_len)
    plan = runner.plan
    print(f"== {text}: runner built in {time.perf_counter() - t0:.1f} s; "
          f"{plan.describe(block, a.max_model_len, cfg.num_kept_blocks)}", flush=True)
    pool = plan.num_blocks * block
    rows = (1, 2, 4, 8) if a.cpu_smoke else tuple(sorted(set(a.rows)))
    points = calibration_grid(engine == "zipage", block, cfg.num_kept_blocks, pool,
                              a.max_num_seqs, a.max_num_batched_tokens, a.max_model_len - block,
                              rows)
    if a.only:
        names = [p.name for p in points]
        points = [p for p in points if any(o in p.name for o in a.only)]
        if not points:
            release(runner, device)
            raise SystemExit(f"--only {' '.join(a.only)}: no {text} grid point matches; "
                             f"its points are: {'; '.join(names)}")
    params = SamplingParams(temperature=a.temperature)
    grid = measure_grid(runner, points, block, cfg.num_kept_blocks, params, warmup=a.warmup,
                        sync_reps=a.sync_reps, reps=a.reps, sustain_s=a.sustain_s,
                        inputs=a.inputs, seed=a.seed)
    memory = {"num_blocks": plan.num_blocks, "block_bytes": plan.block_bytes,
              "num_query_slots": plan.num_query_slots, "query_slot_bytes": plan.query_slot_bytes,
              "gpu_memory_utilization": cfg.gpu_memory_utilization}
    if device.type == "cuda":
        total = torch.cuda.mem_get_info(device)[1]
        memory.update(total_bytes=total, non_kv_bytes=int(
            total * cfg.gpu_memory_utilization - plan.num_query_slots * plan.query_slot_bytes
            - (plan.num_blocks + 0.5) * plan.block_bytes))
    release(runner, device)
    if a.only:  # a probe: raw timings, no fit
        return None, {"grid": grid, "memory": memory}
    host = []
    for n, prompt_len in host_workloads(a, engine, pool):
        sim_opts = dict(opts, kv_cache_tokens=pool, max_num_seqs=n)
        requests = make_requests([a.max_model_len - prompt_len - block] * n, prompt_len)
        host += host_phase_samples(lambda **kw: simulate(
            model_name, sim_opts, requests, fixed_cost_model(), spec=spec, **kw),
            a.host_steps // 3)
    meta = {"engine": engine, "block_size": block, "kv_cache_dtype": a.kv_cache_dtype,
            "fp8_decode": a.fp8_decode, "budget": cfg.budget, "model": a.model,
            "sampling": {"temperature": a.temperature}, "scoring": a.scoring,
            "inputs": a.inputs}
    cost = fit_cost_model(grid, host, meta)
    fit = cost.meta["fit"]
    print(f"   fit: device rms {fit['device']['rms_rel_error']:.1%} max "
          f"{fit['device']['max_abs_rel_error']:.1%} over {fit['device']['points']} points; "
          f"launch rms {fit['launch']['rms_rel_error']:.1%}; schedule rms "
          f"{fit['schedule']['rms_rel_error']:.1%}; post rms {fit['post']['rms_rel_error']:.1%}",
          flush=True)
    return cost.to_dict(), {"grid": grid, "memory": memory, "host_steps": len(host)}


def main(a) -> int:
    if a.replace and not a.merge:
        raise SystemExit("--replace replaces configs of --base with those of --merge files: "
                         "give --merge")
    if a.from_trace or a.add_start or a.merge or a.host_from_trace or a.decode_waves:
        from scripts.sim.refit import refit
        return refit(a)
    if a.cpu_smoke:
        a.configs = [c.replace("b256", "b16").replace("b32", "b16") for c in a.configs]
        a.configs = list(dict.fromkeys(a.configs))
        a.budget_blocks, a.max_num_seqs, a.max_num_batched_tokens = 2, 8, 64
        a.max_model_len, a.host_steps, a.sustain_s = 256, 100, 0.05
    device = bc.device_for(a)
    dtype = bc.torch_dtype(a.dtype, device)
    model_name, base, tmp = bc.engine_model(a, device)
    if device.type == "cpu":
        base["kv_cache_tokens"] = 4096
    for text in a.configs:  # a bad last config fails now, not after the others were timed
        bc.check_engine_options(model_name, runner_options(a, *parse_config(text), base), text)
    workload = {k: getattr(a, k) for k in (
        "model", "configs", "budget_blocks", "max_num_seqs", "max_num_batched_tokens",
        "max_model_len", "temperature", "warmup", "sync_reps", "reps", "sustain_s", "scoring",
        "inputs", "only", "kv_cache_dtype", "fp8_decode", "rows")}
    env = bc.print_header(device, workload)
    started = time.perf_counter()
    path, gguf = resolve(model_name, base.get("load_format", "auto"))
    spec = spec_from_hf_config(load_hf_config(path, gguf))
    model = build_model(spec, path, gguf, base.get("load_format", "auto"), dtype, device, a.seed)
    gpu = env.get("gpu") or "cpu"
    name = "tiny-qwen3" if a.cpu_smoke else os.path.basename(a.model.rstrip("/"))
    kind = "step_probe" if a.only else "step_cost"
    out = a.out or f"results/bench/{kind}_{slug(gpu)}_{slug(name)}.json"
    data = {"format": PROBE_FORMAT if a.only else CALIBRATION_FORMAT, "model": name, "gpu": gpu,
            "copy_bandwidth_GBps": None, "model_shape": dataclasses.asdict(spec),
            "environment": env, "workload": workload, "seconds": None, "complete": False,
            "models": {}, "raw": {}}
    for text in a.configs:
        key = config_key(*parse_config(text), a.kv_cache_dtype)
        cost, data["raw"][key] = calibrate_config(a, text, model, spec, model_name, base,
                                                  device, dtype)
        if cost is not None:
            data["models"][key] = cost
        data["seconds"] = time.perf_counter() - started
        bc.write_json(out, data)  # each finished config is on disk before the next starts
    if not a.only and env.get("sm_count"):  # a GPU: fit its decode kernel's waves
        refit_waves(data)
    copy_bw = copy_bandwidth(device) if device.type == "cuda" else None
    data.update(copy_bandwidth_GBps=copy_bw / 1e9 if copy_bw else None, complete=True,
                seconds=time.perf_counter() - started)
    bc.write_json(out, data)
    print(f"== calibration took {time.perf_counter() - started:.0f} s")
    if tmp is not None:
        tmp.cleanup()
    return 0
