"""Compression cost inside the engine vs decode cost.

    python -m scripts.bench compression          # 64 x 2600 tokens, qwen3-8b shape, budget 2048

Runs N requests (random weights) long enough that every request compresses, with per-stage
compression timing on, and prints the time of one compression of the whole batch (per-stage
breakdown, every round's time) next to the time of 256 decode steps of that batch.
"""
import time

from scripts import common as bc
from scripts.arg_types import positive_int
from zipage import LLM, SamplingParams


def add_arguments(p):
    bc.add_model_arguments(p, cpu_smoke=False)
    bc.add_common_arguments(p)
    p.add_argument("--num-requests", type=positive_int, default=64)
    p.add_argument("--prompt-len", type=positive_int, default=128)
    p.add_argument("--output-len", type=positive_int, default=2600)
    p.add_argument("--budget", type=positive_int, default=2048)
    p.add_argument("--block-size", type=positive_int, default=256)
    bc.add_scoring_arguments(p)
    p.add_argument("--redundancy", default=None, choices=["none", "raw", "lightning"],
                   help="override the redundancy mode of --scoring")


def main(a) -> int:
    device = bc.device_for(a)
    model, opts, _ = bc.engine_model(a, device)
    overrides = {} if a.redundancy is None else {"redundancy": a.redundancy}
    workload = {k: getattr(a, k) for k in ("model", "num_requests", "prompt_len", "output_len",
                                           "budget", "block_size", "scoring", "dtype", "seed")}
    workload["compression"] = compression = bc.scoring(a, **overrides)
    env = bc.print_header(device, workload)
    llm = LLM(model, **opts, budget=a.budget, block_size=a.block_size,
              max_num_seqs=a.num_requests, max_model_len=a.prompt_len + a.output_len + 16,
              compression=compression, profile_compression=True)
    vocab = bc.prompt_vocab(model)
    prompts = bc.random_prompts(a.num_requests, a.prompt_len, vocab, a.seed)
    params = SamplingParams(temperature=0.6, seed=a.seed, max_tokens=a.output_len,
                            ignore_eos=True)
    # Warm-up that compresses (prompts longer than the cap compress right after prefill), so
    # Triton's one-time kernel compilation stays out of the timed run; same batch size.
    long_prompts = bc.random_prompts(a.num_requests, a.budget + 2 * a.block_size, vocab,
                                     a.seed + 1)
    llm.generate(long_prompts, SamplingParams(max_tokens=4, ignore_eos=True), use_tqdm=False)
    assert llm.last_stats.num_compressions >= a.num_requests, "warm-up did not compress"
    compressor = llm.runner.compressor  # per-stage timers (engine internals)
    compressor.stage_ms.clear()
    compressor.round_ms.clear()
    t0 = time.perf_counter()
    outs = llm.generate(prompts, params, use_tqdm=False)
    wall = time.perf_counter() - t0
    st = llm.last_stats
    events = st.num_compressions / a.num_requests  # batch-wide compression rounds
    per_round = {k: v / max(events, 1) for k, v in compressor.stage_ms.items()}
    step_ms = (wall - st.compression_time_s) / st.num_steps * 1e3
    peak = max(o.metrics["peak_kv_tokens"] for o in outs)
    print(f"requests {a.num_requests}, steps {st.num_steps}, compressions {st.num_compressions} "
          f"({events:.1f} per request), peak KV tokens {peak}")
    print(f"wall {wall:.2f} s, output tok/s {st.output_tokens_per_s:.0f}, compression share "
          f"{st.compression_time_s / wall:.1%}")
    print("per-stage compression time per batch round (ms): "
          + ", ".join(f"{k}={v:.2f}" for k, v in per_round.items()))
    rounds = compressor.round_ms
    full = sorted(ms for n, ms in rounds if n == a.num_requests)
    print(f"compression calls: {len(rounds)} (batch sizes {sorted({n for n, _ in rounds})}); "
          f"whole-batch calls: {len(full)}, ms min/median/max "
          + (f"{full[0]:.1f}/{full[len(full) // 2]:.1f}/{full[-1]:.1f}" if full else "-"))
    one = per_round.get("total", 0.0)
    ratio = one / (256 * step_ms)
    print(f"\n{'one compression of the batch':<36}{one:>10.1f} ms")
    print(f"{'256 decode steps of the batch':<36}{256 * step_ms:>10.1f} ms  "
          f"({step_ms:.2f} ms/step)")
    print(f"{'ratio (compression / 256 steps)':<36}{ratio:>10.3f}")
    bc.write_json(a.json, dict(environment=env, workload=workload, wall_time_s=wall,
                               stats=st.as_dict(), stage_ms_per_round=per_round,
                               round_ms=rounds, decode_step_ms=step_ms, ratio=ratio))
    return 0
