"""Host cost of one engine step without a model: schedule, batch building, post-processing.

    python -m scripts.bench host --num-requests 192 256 512

Pure Python (scheduler, block manager, batch builder) driven with fixed sampled tokens, in
the shape of the long-reasoning benchmark (128-token prompts, block 32, budget 256, so
requests compress every 32 steps). This is the work that runs between two forward passes
unless async_scheduling hides it; compare runs on the same machine only.
"""
import random
import time

import torch

from scripts import common as bc
from scripts.arg_types import count_or_zero, positive_int
from zipage.engine.block_manager import BlockManager
from zipage.engine.messages import StepResult
from zipage.engine.scheduler import Scheduler, SchedulerConfig
from zipage.engine.sequence import Sequence
from zipage.sampling_params import SamplingParams
from zipage.worker.batch import build_batch

PHASES = ("schedule", "build_batch", "postprocess")


def add_arguments(p):
    bc.add_common_arguments(p)
    p.add_argument("--num-requests", type=positive_int, nargs="+", default=[64, 192, 512])
    p.add_argument("--steps", type=positive_int, default=500, help="timed steps (after --warmup)")
    p.add_argument("--warmup", type=count_or_zero, default=100)
    p.add_argument("--block-size", type=positive_int, default=32)
    p.add_argument("--budget", type=positive_int, default=256)
    p.add_argument("--prompt-len", type=positive_int, default=128)


def measure(n: int, steps: int, warmup: int, block: int, kept_blocks: int, prompt_len: int,
            seed: int) -> dict:
    """Mean ms per step of each host phase, n requests decoding (and compressing)."""
    rng = random.Random(seed)
    bm = BlockManager(n * (kept_blocks + 2) + 64, block, enable_prefix_caching=True)
    sch = Scheduler(SchedulerConfig(block_size=block, max_num_seqs=n, max_num_batched_tokens=8192,
                                    max_model_len=10**6, num_kept_blocks=kept_blocks,
                                    num_query_slots=n), bm)
    params = SamplingParams(temperature=0.6, max_tokens=10**6, ignore_eos=True)
    for i in range(n):
        sch.add(Sequence([rng.randrange(1000) for _ in range(prompt_len)], params, block, i, 0, i))
    totals = dict.fromkeys(PHASES, 0.0)
    num_compressions = 0
    for step in range(warmup + steps):
        t0 = time.perf_counter()
        out = sch.schedule()
        t1 = time.perf_counter()
        build_batch(out, block, 16)
        t2 = time.perf_counter()
        sampled = {sid: 7 for sid, row in out.requests.items() if row.sampling is not None}
        sch.update_from_output(out, StepResult(sampled), set())
        t3 = time.perf_counter()
        if step >= warmup:
            for k, dt in zip(PHASES, (t1 - t0, t2 - t1, t3 - t2)):
                totals[k] += dt
            num_compressions += len(out.compressions)
    result = {k: v / steps * 1e3 for k, v in totals.items()}
    result["total"] = sum(result.values())
    result["compressions_per_step"] = num_compressions / steps
    return result


def main(a) -> int:
    if a.budget % a.block_size:
        raise SystemExit(f"--budget must be a multiple of --block-size ({a.block_size})")
    device = torch.device("cpu")
    workload = dict(num_requests=a.num_requests, steps=a.steps, warmup=a.warmup,
                    block_size=a.block_size, budget=a.budget, prompt_len=a.prompt_len,
                    seed=a.seed)
    env = bc.print_header(device, workload)
    print(f"\n{'requests':>9}{'schedule ms':>13}{'build ms':>10}{'post ms':>9}{'total ms':>10}"
          f"{'compress/step':>15}")
    rows = {}
    for n in a.num_requests:
        r = rows[n] = measure(n, a.steps, a.warmup, a.block_size, a.budget // a.block_size,
                              a.prompt_len, a.seed)
        print(f"{n:>9}{r['schedule']:>13.3f}{r['build_batch']:>10.3f}{r['postprocess']:>9.3f}"
              f"{r['total']:>10.3f}{r['compressions_per_step']:>15.2f}")
    if len(rows) > 1:
        lo, hi = min(rows), max(rows)
        print(f"ratio {hi} / {lo} requests: {rows[hi]['total'] / rows[lo]['total']:.2f}x total "
              f"host time per step ({hi / lo:.2f}x requests)")
    bc.write_json(a.json, dict(environment=env, workload=workload, per_step_ms=rows))
    return 0
