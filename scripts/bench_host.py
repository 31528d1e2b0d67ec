"""Host cost of one engine step without a model: schedule, batch building, post-processing.

    python scripts/bench_host.py --num-requests 192 256 512

Pure Python (scheduler, block manager, batch builder) driven with fixed sampled tokens, in
the shape of the long-reasoning benchmark (128-token prompts, block 32, budget 256, so
requests compress every 32 steps). This is the work that runs between two forward passes
unless async_scheduling hides it; compare runs on the same machine only.
"""
import argparse
import platform
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zipage.engine.block_manager import BlockManager  # noqa: E402
from zipage.engine.messages import StepResult  # noqa: E402
from zipage.engine.scheduler import Scheduler, SchedulerConfig  # noqa: E402
from zipage.engine.sequence import Sequence  # noqa: E402
from zipage.worker.batch import build_batch  # noqa: E402
from zipage.sampling_params import SamplingParams  # noqa: E402


def measure(n: int, steps: int, block: int, kept_blocks: int, warmup: int = 100) -> dict:
    rng = random.Random(0)
    bm = BlockManager(n * (kept_blocks + 2) + 64, block, enable_prefix_caching=True)
    sch = Scheduler(SchedulerConfig(block_size=block, max_num_seqs=n, max_num_batched_tokens=8192,
                                    max_model_len=10**6, num_kept_blocks=kept_blocks,
                                    num_query_slots=n), bm)
    params = SamplingParams(temperature=0.6, max_tokens=10**6, ignore_eos=True)
    for i in range(n):
        sch.add(Sequence([rng.randrange(1000) for _ in range(128)], params, block, i, 0, i))
    totals = dict(schedule=0.0, build_batch=0.0, postprocess=0.0)
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
            for k, dt in zip(totals, (t1 - t0, t2 - t1, t3 - t2)):
                totals[k] += dt
    return {k: v / steps * 1e3 for k, v in totals.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--num-requests", type=int, nargs="+", default=[64, 192, 512])
    ap.add_argument("--steps", type=int, default=500)
    a = ap.parse_args()
    print(f"python {platform.python_version()} on {platform.processor() or platform.machine()}; "
          f"{a.steps} steps after 100 warm-up; block 32, budget 256, 128-token prompts")
    print(f"{'requests':>9}{'schedule ms':>13}{'build ms':>10}{'post ms':>9}{'total ms':>10}")
    for n in a.num_requests:
        r = measure(n, a.steps, block=32, kept_blocks=8)
        print(f"{n:>9}{r['schedule']:>13.3f}{r['build_batch']:>10.3f}{r['postprocess']:>9.3f}"
              f"{sum(r.values()):>10.3f}")


if __name__ == "__main__":
    main()
