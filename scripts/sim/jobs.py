"""What `bench simulate` and `bench simulate --paper` share: one simulation job per engine
(its options, cost model and pool) and the report each gives."""
import dataclasses

from scripts import common as bc
from zipage.sim import report as rp
from zipage.sim.cost_model import fixed_cost_model
from zipage.sim.shapes import estimated_memory, model_spec


def cost_for(cal):
    return (lambda engine, block, kv="auto": fixed_cost_model()) if cal is None else cal.cost


def memory_for(a, cal, engine: str, gpu_gib: float | None = None, kv_dtype: str = "auto"):
    if a.kv_cache_tokens is not None:
        return None
    gib = gpu_gib or a.gpu_memory_gib
    total = int(gib * 2**30) if gib else None
    if cal is not None and (memory := cal.memory(engine, a.block_size, total,
                                                 kv_dtype)) is not None:
        return memory
    if total is None:
        raise SystemExit("size the pool: --kv-cache-tokens or --gpu-memory-gib (the calibration "
                         "has no memory record)")
    return estimated_memory(model_spec(a.model), bc.torch_dtype("bfloat16", None), total)


def options(a, engine: str, budget: int | None = None, kv_dtype: str = "auto") -> dict:
    opts = dict(load_format="dummy", kv_cache_dtype=kv_dtype, block_size=a.block_size,
                max_num_seqs=a.max_num_seqs,
                max_num_batched_tokens=a.max_num_batched_tokens,
                max_model_len=a.prompt_len + a.max_output_len + a.block_size,
                async_scheduling=a.async_scheduling, seed=a.seed)
    if a.kv_cache_tokens is not None:
        opts["kv_cache_tokens"] = a.kv_cache_tokens
    if engine == "zipage":
        opts.update(budget=budget or a.budget, compression=dataclasses.asdict(bc.scoring(a)))
    return opts


def job(a, cal, engine, requests, budget=None, gpu_gib=None, label="", kv_dtype=None) -> dict:
    kv_dtype = kv_dtype or a.kv_cache_dtype
    try:
        cost = cost_for(cal)(engine, a.block_size, kv_dtype)
    except ValueError as e:  # no config of this engine and KV dtype
        raise SystemExit(str(e)) from None
    opts = bc.check_engine_options(a.model, options(a, engine, budget, kv_dtype), engine)
    return dict(label=label, model=a.model, options=opts,
                requests=requests, cost=cost,
                memory=memory_for(a, cal, engine, gpu_gib, kv_dtype), seed=a.seed,
                temperature=a.temperature, log_every_s=None if a.jobs > 1 else 60,
                copy_bandwidth_Bps=cal.copy_bandwidth_Bps if cal else None)


def to_report(a, cal, results: dict, output_len, num_requests, budget=None, **extra) -> dict:
    return rp.build_report("simulated", model=a.model, gpu=cal.gpu if cal else None,
                           output_len=output_len, num_requests=num_requests,
                           prompt_len=a.prompt_len, budget=budget or a.budget,
                           block_size=a.block_size, async_scheduling=a.async_scheduling,
                           engines=results, cost_model=cal.path if cal else "fixed",
                           **({"what_if": cal.what_if} if cal and cal.what_if else {}), **extra)


def print_report(r: dict) -> None:
    print(f"\n{'engine':<8}{'tok/s':>9}{'virtual s':>11}{'steps':>9}{'mean run':>10}"
          f"{'preempt':>9}{'compress':>10}{'pool tok':>10}{'roofline':>10}")
    for name in rp.ENGINES:
        e = r.get(name)
        if e:
            roof = "-" if e["roofline_fraction"] is None else f"{e['roofline_fraction']:.1%}"
            print(f"{name:<8}{e['output_tokens_per_s']:>9.0f}{e['wall_time_s']:>11.1f}"
                  f"{e['steps']:>9}{e['mean_running']:>10.1f}{e['preemptions']:>9}"
                  f"{e['compressions']:>10}{e['pool_tokens']:>10}{roof:>10}")
    if r["speedup"] is not None:
        print(f"speedup zipage / full KV: {r['speedup']:.2f}x")
    if r.get("what_if"):
        print(f"== {r['what_if']}")
